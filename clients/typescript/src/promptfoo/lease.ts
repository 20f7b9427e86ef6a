/**
 * Leases on run keys, as the Python writers take them: a JSON message on the compacted leases
 * topic keyed `run key/token` in the run key's partition. Claim, read back, and the live
 * overlapping lease claimed first in the log wins; renewed every third of its time to live,
 * deleted (a tombstone) on release; a fence message `run key/fence/token` takes it over.
 */
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import kafkajs from "kafkajs";
import type { Admin, Kafka, KafkaMessage, Producer } from "kafkajs";
import { ResultLogError } from "../errors.js";
import { readPartition } from "../partitionReader.js";
import { partitionFor, runKeyPrefix, type RunKey } from "../runKey.js";
import { processGone, processIdentity } from "./process.js";

const { Kafka: KafkaClient, logLevel } = kafkajs;
const RENEWALS_PER_TTL = 3;
const READ_TIMEOUT_MS = 15_000;

/** A lease could not be read, claimed or kept. */
export class LeaseError extends ResultLogError {}

/** Another live holder leases an overlapping range of the run key. */
export class LeaseHeldError extends LeaseError {
  constructor(
    runKey: RunKey,
    span: [number, number],
    readonly holder: LeaseValue,
  ) {
    const since = new Date(holder.since_ms).toISOString().slice(11, 19);
    const expiresIn = Math.max(0, Math.round(holder.expires_ms / 1000 - Date.now() / 1000));
    super(
      `${describe(runKey)} samples ${span[0]}:${span[1]} overlap samples ${holder.start}:${holder.end} ` +
        `leased by host ${holder.host} pid ${holder.pid} since ${since} UTC ` +
        `(expires in ${expiresIn}s unless renewed); wait for it to finish or expire`,
    );
  }
}

/** The lease expired or was taken over before this process renewed it: start nothing more. */
export class LeaseLostError extends LeaseError {}

/** One lease as the leases topic holds it (the Python Lease model's fields, in its order). */
export interface LeaseValue {
  host: string;
  pid: number;
  token: string;
  process: string | null;
  start: number;
  end: number;
  since_ms: number;
  expires_ms: number;
  claim_offset: number | null;
}

/** Where leases live: a connected admin and producer on the leases topic. */
export class LeaseClient {
  private constructor(
    readonly topic: string,
    readonly ttlMs: number,
    readonly kafka: Kafka,
    readonly admin: Admin,
    readonly producer: Producer,
  ) {}

  /** Connect to `brokers` for the leases topic (RESULTLOG_LEASES_TOPIC, RESULTLOG_LEASE_TTL_S). */
  static async connect(brokers: string, clientId: string, env: NodeJS.ProcessEnv = process.env): Promise<LeaseClient> {
    const topic = env["RESULTLOG_LEASES_TOPIC"] ?? "resultlog.leases";
    const ttlS = Number(env["RESULTLOG_LEASE_TTL_S"] ?? "30");
    if (!Number.isFinite(ttlS) || ttlS < 1 || ttlS > 3600) {
      throw new LeaseError(`RESULTLOG_LEASE_TTL_S must be a number of seconds in [1, 3600], got ${env["RESULTLOG_LEASE_TTL_S"]}`);
    }
    const kafka = new KafkaClient({
      clientId,
      brokers: brokers.split(",").map((s) => s.trim()),
      logLevel: logLevel.NOTHING,
      connectionTimeout: 10_000,
      retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 5_000 },
    });
    const admin = kafka.admin();
    const producer = kafka.producer({ idempotent: false, allowAutoTopicCreation: false });
    try {
      await admin.connect();
      await producer.connect();
    } catch (error) {
      await admin.disconnect().catch(() => undefined);
      throw new LeaseError(`cannot connect to Kafka at ${brokers} for leases: ${messageOf(error)}`, { cause: error });
    }
    return new LeaseClient(topic, ttlS * 1000, kafka, admin, producer);
  }

  /** Lease samples [start, end) of the run key, renewed until released; LeaseHeldError when a
   * live lease on an overlapping range came first. */
  async claim(runKey: RunKey, span: [number, number]): Promise<RunLease> {
    if (!(0 <= span[0] && span[0] < span[1])) {
      throw new RangeError(`a lease covers 0 <= start < end, got ${span[0]}:${span[1]}`);
    }
    const metadata = await this.admin.fetchTopicMetadata({ topics: [this.topic] }).catch((error: unknown) => {
      throw new LeaseError(`cannot lease ${describe(runKey)}: topic ${this.topic}: ${messageOf(error)}`, { cause: error });
    });
    const partition = partitionFor(runKey, metadata.topics[0]!.partitions.length);
    const lease = new RunLease(this, runKey, span, partition);
    await lease.claim();
    return lease;
  }

  /** Disconnect (release every lease first). */
  async close(): Promise<void> {
    await this.producer.disconnect();
    await this.admin.disconnect();
  }
}

/** A lease this process holds on a run key's sample range. */
export class RunLease {
  lease: LeaseValue;
  /** Who took the lease over (a purge's fence), or "" while it is ours. */
  fencedBy = "";
  /** Renewals that failed (tried again; the lease expires if they go on failing). */
  renewFailures = 0;
  private readonly key: Buffer;
  private readonly prefix: Uint8Array;
  private lost = false;
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> = Promise.resolve();

  constructor(
    private readonly client: LeaseClient,
    readonly runKey: RunKey,
    readonly span: [number, number],
    private readonly partition: number,
  ) {
    const token = randomBytes(8).toString("hex");
    this.prefix = runKeyPrefix(runKey);
    this.key = Buffer.concat([this.prefix, Buffer.from(token, "ascii")]);
    const now = Date.now();
    this.lease = {
      host: hostname(),
      pid: process.pid,
      token,
      process: processIdentity(process.pid),
      start: span[0],
      end: span[1],
      since_ms: now,
      expires_ms: now + client.ttlMs,
      claim_offset: null,
    };
  }

  /** Claim the range, or throw LeaseHeldError naming the holder that came first. */
  async claim(): Promise<void> {
    this.refuseIfHeld(await this.read());
    const offset = await this.write(JSON.stringify(this.lease));
    let leases: Map<string, [number, LeaseValue]>;
    try {
      leases = await this.read();
      this.refuseIfHeld(leases, offset);
    } catch (error) {
      await this.withdraw();
      throw error;
    }
    this.lease = { ...this.lease, claim_offset: offset };
    await this.sweep(leases);
    this.schedule();
  }

  /** Throw LeaseLostError unless the lease is still ours (renewed in time, by our clock). */
  check(): void {
    if (this.fencedBy) {
      throw new LeaseLostError(`the lease on ${describe(this.runKey)} was taken over by ${this.fencedBy}: starting no more cases`);
    }
    if (this.lost || Date.now() >= this.lease.expires_ms) {
      this.lost = true;
      throw new LeaseLostError(
        `the lease on ${describe(this.runKey)} samples ${this.span[0]}:${this.span[1]} expired before this process ` +
          "renewed it (stalled or cut off from Kafka); another writer may hold it now: starting no more cases",
      );
    }
  }

  /** Stop renewing and delete the lease (if Kafka cannot be reached, it expires). */
  async release(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.renewing;
    if (!this.fencedBy) {
      await this.withdraw();
    }
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.renewing = this.renewOnce().finally(() => {
        if (this.timer !== undefined && !this.fencedBy && !this.lost) {
          this.schedule();
        }
      });
    }, this.client.ttlMs / RENEWALS_PER_TTL);
    this.timer.unref(); // a lease never keeps the process alive: it expires by itself
  }

  private async renewOnce(): Promise<void> {
    try {
      const fence = Buffer.concat([this.prefix, Buffer.from(`fence/${this.lease.token}`, "ascii")]);
      const fenced = await this.latestValue(fence);
      if (fenced !== null) {
        this.fencedBy = fenced.toString("utf8");
        return;
      }
      this.check();
      this.lease = { ...this.lease, expires_ms: Date.now() + this.client.ttlMs };
      await this.write(JSON.stringify(this.lease));
    } catch {
      // A lost lease says so at the next check(); a failed renewal is tried again next time.
      this.renewFailures += 1;
    }
  }

  private refuseIfHeld(leases: Map<string, [number, LeaseValue]>, before?: number): void {
    const now = Date.now();
    const own = this.key.toString("hex");
    for (const [key, [offset, other]] of leases) {
      if (key === own || !overlaps(other, this.span) || !live(other, now)) {
        continue;
      }
      const claimed = other.claim_offset ?? offset;
      if (before === undefined || claimed < before) {
        throw new LeaseHeldError(this.runKey, this.span, other);
      }
    }
  }

  /** Delete the run key's dead leases (crashed holders), so compaction drops them. */
  private async sweep(leases: Map<string, [number, LeaseValue]>): Promise<void> {
    const now = Date.now();
    for (const [key, [, other]] of leases) {
      if (key !== this.key.toString("hex") && !live(other, now)) {
        await this.write(null, Buffer.from(key, "hex")).catch(() => undefined); // hygiene only
      }
    }
  }

  private async withdraw(): Promise<void> {
    await this.write(null).catch(() => undefined); // unreachable Kafka: it expires by itself
  }

  /** Produce the lease (null: a tombstone), acknowledged by every in-sync replica; its offset. */
  private async write(value: string | null, key: Buffer = this.key): Promise<number> {
    try {
      const [sent] = await this.client.producer.send({
        topic: this.client.topic,
        acks: -1,
        timeout: 30_000,
        messages: [{ key, value: value === null ? null : Buffer.from(value, "utf8"), partition: this.partition }],
      });
      return Number(sent!.baseOffset);
    } catch (error) {
      throw new LeaseError(`cannot write the lease on ${describe(this.runKey)}: ${messageOf(error)}`, { cause: error });
    }
  }

  /** The run key's latest lease (offset, value) by key (hex), tombstones applied. */
  private async read(): Promise<Map<string, [number, LeaseValue]>> {
    const leases = new Map<string, [number, LeaseValue]>();
    await this.scan((message) => {
      const key = message.key;
      if (key === null || !startsWith(key, this.prefix)) {
        return;
      }
      const hex = key.toString("hex");
      if (message.value === null) {
        leases.delete(hex);
        return;
      }
      const lease = parseLease(message.value);
      if (lease !== null) {
        leases.set(hex, [Number(message.offset), lease]);
      }
    });
    return leases;
  }

  private async latestValue(key: Buffer): Promise<Buffer | null> {
    let found: Buffer | null = null;
    await this.scan((message) => {
      if (message.key !== null && message.key.equals(key)) {
        found = message.value;
      }
    });
    return found;
  }

  /** Read the partition from its start; a partition moving (a new topic, a leader election)
   * is waited out for up to READ_TIMEOUT_MS, each try seeing the messages afresh. */
  private async scan(onMessage: (message: KafkaMessage) => void): Promise<void> {
    const deadline = Date.now() + READ_TIMEOUT_MS;
    for (;;) {
      const seen: KafkaMessage[] = [];
      try {
        await readPartition(this.client.kafka, this.client.admin, this.client.topic, this.partition, (m) => seen.push(m), READ_TIMEOUT_MS);
        seen.forEach(onMessage);
        return;
      } catch (error) {
        if (Date.now() > deadline) {
          throw new LeaseError(`cannot read the leases of ${describe(this.runKey)}: ${messageOf(error)}`, { cause: error });
        }
        await sleep(200);
      }
    }
  }
}

/** A lease value as the Python reader accepts it (extra fields ignored), or null. */
export function parseLease(value: Buffer | string): LeaseValue | null {
  let raw: unknown;
  try {
    raw = JSON.parse(value.toString());
  } catch {
    return null;
  }
  if (typeof raw !== "object" || raw === null) {
    return null;
  }
  const r = raw as Record<string, unknown>;
  const ints = ["pid", "start", "end", "since_ms", "expires_ms"].every((name) => Number.isSafeInteger(r[name]));
  const claim = r["claim_offset"] ?? null;
  const processId = r["process"] ?? null;
  if (!ints || typeof r["host"] !== "string" || typeof r["token"] !== "string") {
    return null;
  }
  if ((claim !== null && !Number.isSafeInteger(claim)) || (processId !== null && typeof processId !== "string")) {
    return null;
  }
  return {
    host: r["host"],
    pid: r["pid"] as number,
    token: r["token"],
    process: processId as string | null,
    start: r["start"] as number,
    end: r["end"] as number,
    since_ms: r["since_ms"] as number,
    expires_ms: r["expires_ms"] as number,
    claim_offset: claim as number | null,
  };
}

function overlaps(lease: LeaseValue, [start, end]: [number, number]): boolean {
  return lease.start < end && start < lease.end;
}

function live(lease: LeaseValue, nowMs: number): boolean {
  return lease.expires_ms > nowMs && !processGone(lease.process, lease.pid);
}

function startsWith(key: Buffer, prefix: Uint8Array): boolean {
  return key.length >= prefix.length && prefix.every((byte, i) => key[i] === byte);
}

function describe(runKey: RunKey): string {
  return `${runKey.runId} / ${runKey.benchmarkId} / ${runKey.model}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
