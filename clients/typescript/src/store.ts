/** The seed's SampleResultStore contract on Kafka: load a run key's completed entries, write
 * each record durably, write degraded outcomes at the end of a run. */
import kafkajs from "kafkajs";
import type { Admin, Kafka, KafkaMessage, Producer, RecordMetadata } from "kafkajs";
import { AckedOffsets } from "./ackedOffsets.js";
import { decodeSampleResult, encodeSampleResult } from "./codec.js";
import { ConfigChangedError, PersistenceError, ResultLogError } from "./errors.js";
import { readPartition } from "./partitionReader.js";
import type { DecodedSampleResult, SampleResult } from "./record.js";
import { WritePolicy } from "./retry.js";
import { keyIndexes, partitionFor, recordKey, runKeyPrefix, type RunKey } from "./runKey.js";
import { settingsFromEnv, type StoreSettings } from "./settings.js";
import { registerZstd } from "./zstd.js";

const { Kafka: KafkaClient, logLevel } = kafkajs;
registerZstd();

/** What a run may skip and what seeds its accumulator, as the Python resume sorts them. */
export interface ResumeState {
  /** The latest completed record of each (sample, epoch) within the run's epochs. */
  seeds: DecodedSampleResult[];
  /** Latest records that are degraded: retried by the run, never skipped. */
  degraded: DecodedSampleResult[];
  /** `pairKey(sampleIndex, epoch)` of every seed. */
  skipList: ReadonlySet<string>;
  /** Latest records whose epoch is outside [0, epochs): ignored. */
  outOfRange: number;
  /** Latest values that could not be decoded: ignored (their pairs are evaluated again). */
  undecodable: number;
  /** Records without a configuration (schema v1): reused unchecked. */
  unconfigured: number;
}

export interface LoadOptions {
  /** The run's epoch count: records of other epochs are ignored. */
  epochs: number;
  /** The run's config_fingerprint: records made under another one are refused (unless
   * acceptConfigChange), records without one are reused. */
  configFingerprint?: string | null;
  acceptConfigChange?: boolean;
}

export interface StoreOptions {
  settings?: Partial<StoreSettings>;
  policy?: WritePolicy;
  /** KafkaJS's own log level (silent by default: the store's errors say what failed). */
  kafkaLogLevel?: number;
}

/** What became of a run's degraded outcomes. */
export interface DegradedWrites {
  written: SampleResult[];
  /** Pairs another writer completed: their degraded outcome was not written. */
  superseded: number;
  /** Completed records written again because a degraded one lay over them. */
  restored: number;
}

/** The skip-list's key of a pair. */
export function pairKey(sampleIndex: number | bigint, epoch: number | bigint): string {
  return `${sampleIndex}/${epoch}`;
}

interface KeyHistory {
  latest: DecodedSampleResult | null;
  completedValue: Buffer | null;
}

/** Writes records to the compacted results topic, one partition per run key; bound to the
 * topic it started on (see AckedOffsets): once that topic was re-created, every write throws
 * TopicRecreatedError. */
export class KafkaResultStore {
  private readonly acked: AckedOffsets;

  private constructor(
    readonly settings: StoreSettings,
    readonly policy: WritePolicy,
    readonly partitions: number,
    private readonly kafka: Kafka,
    private readonly admin: Admin,
    private readonly producer: Producer,
  ) {
    this.acked = new AckedOffsets(settings.resultsTopic);
  }

  /** Connect to RESULTLOG_BOOTSTRAP_SERVERS (or `options.settings`) and check the topic. */
  static async connect(options: StoreOptions = {}): Promise<KafkaResultStore> {
    const settings = { ...settingsFromEnv(), ...options.settings };
    const kafka = new KafkaClient({
      clientId: settings.clientId,
      brokers: settings.bootstrapServers.split(",").map((s) => s.trim()),
      logLevel: options.kafkaLogLevel ?? logLevel.NOTHING,
      connectionTimeout: 10_000,
      retry: { retries: 5, initialRetryTime: 200, maxRetryTime: 5_000 },
    });
    const admin = kafka.admin();
    try {
      await admin.connect();
      const partitions = await partitionCount(admin, settings.resultsTopic);
      const producer = kafka.producer({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        // Bounded: the WritePolicy's attempts decide when a write fails the run.
        retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2_000 },
      });
      await producer.connect();
      return new KafkaResultStore(settings, options.policy ?? new WritePolicy(), partitions, kafka, admin, producer);
    } catch (error) {
      await admin.disconnect().catch(() => undefined);
      if (error instanceof ResultLogError) {
        throw error;
      }
      throw new PersistenceError(`cannot connect to Kafka at ${settings.bootstrapServers}: ${message(error)}`, {
        cause: error,
        retriable: false,
      });
    }
  }

  /** Make the record durable (acks=all, idempotent producer): resolves only once the broker
   * acknowledged it; PersistenceError once the policy's attempts are spent. */
  async write(record: SampleResult): Promise<void> {
    const value = encodeSampleResult(record); // a SchemaError is not retried
    const where = `sample ${record.sample_id} epoch ${record.epoch}`;
    await this.policy.retry(`persist ${where}`, () => this.send(record, value));
  }

  /** Read the run key's latest record per (sample, epoch) and sort them for a resume. */
  async load(runKey: RunKey, options: LoadOptions): Promise<ResumeState> {
    const latest = await this.policy.retry(`read the records of ${describe(runKey)}`, () => this.latestValues(runKey));
    let undecodable = 0;
    const records: DecodedSampleResult[] = [];
    for (const [pair, value] of latest) {
      const record = decodeOwn(runKey, pair, value);
      if (record === null) {
        undecodable += 1;
      } else {
        records.push(record);
      }
    }
    const unconfigured = checkConfig(runKey, records, options);
    const inRange = records.filter((r) => Number(r.epoch) >= 0 && Number(r.epoch) < options.epochs);
    const seeds = inRange.filter((r) => r.status !== "degraded");
    return {
      seeds,
      degraded: inRange.filter((r) => r.status === "degraded"),
      skipList: new Set(seeds.map((r) => pairKey(r.sample_index, r.epoch))),
      outOfRange: records.length - inRange.length,
      undecodable,
      unconfigured,
    };
  }

  /**
   * Write a run's degraded outcomes once every pair has settled, never over a completed
   * record another writer made durable: such pairs are skipped, and a completed record a
   * degraded one now lies over is written again, byte for byte, so it is the latest.
   * Fail-closed like every write: a run whose degraded outcomes are not durable fails.
   */
  async writeDegraded(runKey: RunKey, records: SampleResult[]): Promise<DegradedWrites> {
    const sorted = [...records].sort((a, b) => Number(a.sample_index) - Number(b.sample_index) || Number(a.epoch) - Number(b.epoch));
    const pairs = new Set(sorted.map((r) => pairKey(r.sample_index, r.epoch)));
    if (pairs.size === 0) {
      return { written: [], superseded: 0, restored: 0 };
    }
    const before = await this.histories(runKey, pairs);
    let restored = await this.restoreShadowed(runKey, before);
    const toWrite = sorted.filter((r) => before.get(pairKey(r.sample_index, r.epoch))?.completedValue == null);
    for (const record of toWrite) {
      await this.write(record);
    }
    const after = await this.histories(runKey, new Set(toWrite.map((r) => pairKey(r.sample_index, r.epoch))));
    restored += await this.restoreShadowed(runKey, after);
    const superseded = [...pairs].filter((p) => before.get(p)?.completedValue != null || after.get(p)?.completedValue != null);
    return {
      written: toWrite.filter((r) => !superseded.includes(pairKey(r.sample_index, r.epoch))),
      superseded: superseded.length,
      restored,
    };
  }

  /** Disconnect; every write that resolved is already durable. */
  async close(): Promise<void> {
    await this.producer.disconnect();
    await this.admin.disconnect();
  }

  private async send(record: SampleResult, value: Uint8Array, key?: Uint8Array): Promise<void> {
    const runKey = { runId: record.run_id, benchmarkId: record.benchmark_id, model: record.model };
    this.acked.check(); // never a record into a topic known to be another
    let acknowledged: RecordMetadata[];
    try {
      acknowledged = await this.producer.send({
        topic: this.settings.resultsTopic,
        acks: -1,
        timeout: 30_000,
        messages: [
          {
            key: Buffer.from(key ?? recordKey(runKey, record.sample_index, record.epoch)),
            value: Buffer.from(value),
            partition: partitionFor(runKey, this.partitions),
          },
        ],
      });
    } catch (error) {
      const type = kafkaErrorType(error);
      const fatal = type !== undefined && FATAL.has(type);
      const reason = fatal ? `${type}: ${message(error)}` : message(error);
      throw new PersistenceError(`writing sample ${record.sample_id} epoch ${record.epoch} failed: ${reason}`, {
        cause: error,
        retriable: !fatal,
      });
    }
    for (const { partition, baseOffset } of acknowledged) {
      if (baseOffset !== undefined) {
        this.acked.note(partition, BigInt(baseOffset));
      }
    }
  }

  /** Each live key's latest value, by pair, in log order. */
  private async latestValues(runKey: RunKey): Promise<Map<string, Buffer>> {
    const prefix = runKeyPrefix(runKey);
    const latest = new Map<string, Buffer>();
    await this.readRun(runKey, (message) => {
      const indexes = message.key === null ? null : keyIndexes(prefix, message.key);
      if (indexes !== null) {
        const pair = pairKey(...indexes);
        latest.delete(pair); // the newest value comes last in the map, as in the log
        if (message.value !== null) {
          latest.set(pair, message.value);
        }
      }
    });
    return latest;
  }

  /** Each pair's latest record and last completed value (after any tombstone). */
  private async histories(runKey: RunKey, pairs: ReadonlySet<string>): Promise<Map<string, KeyHistory>> {
    const read = async () => {
      const prefix = runKeyPrefix(runKey);
      const found = new Map<string, KeyHistory>([...pairs].map((p) => [p, { latest: null, completedValue: null }]));
      await this.readRun(runKey, (message) => {
        const indexes = message.key === null ? null : keyIndexes(prefix, message.key);
        const history = indexes === null ? undefined : found.get(pairKey(...indexes));
        if (history === undefined) {
          return;
        }
        const record = message.value === null ? null : decodeOwn(runKey, pairKey(...indexes!), message.value);
        history.latest = record;
        if (message.value === null) {
          history.completedValue = null;
        } else if (record?.status === "completed") {
          history.completedValue = message.value;
        }
      });
      return found;
    };
    return this.policy.retry(`read the log of ${describe(runKey)} around its degraded outcomes`, read);
  }

  private async restoreShadowed(runKey: RunKey, histories: Map<string, KeyHistory>): Promise<number> {
    let restored = 0;
    for (const [pair, history] of histories) {
      if (history.latest?.status === "degraded" && history.completedValue !== null) {
        const completed = decodeSampleResult(history.completedValue);
        const [sampleIndex, epoch] = pair.split("/").map(Number) as [number, number];
        const key = recordKey(runKey, sampleIndex, epoch);
        await this.policy.retry(`restore sample ${completed.sample_id} epoch ${epoch}`, () =>
          this.send(completed, history.completedValue!, key),
        );
        restored += 1;
      }
    }
    return restored;
  }

  private async readRun(runKey: RunKey, onMessage: (message: KafkaMessage) => void): Promise<void> {
    const partition = partitionFor(runKey, this.partitions);
    await readPartition(this.kafka, this.admin, this.settings.resultsTopic, partition, onMessage);
  }
}

// Errors no retry can help: the record or the principal must change first.
const FATAL = new Set([
  "MESSAGE_TOO_LARGE",
  "RECORD_LIST_TOO_LARGE",
  "INVALID_RECORD",
  "TOPIC_AUTHORIZATION_FAILED",
  "CLUSTER_AUTHORIZATION_FAILED",
  "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
  "UNKNOWN_TOPIC_OR_PARTITION",
]);

async function partitionCount(admin: Admin, topic: string): Promise<number> {
  const topics = await admin.listTopics();
  if (!topics.includes(topic)) {
    throw new PersistenceError(`topic ${topic} does not exist: create it with \`resultlog topics create\``, {
      retriable: false,
    });
  }
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  return metadata.topics[0]!.partitions.length;
}

/** The record of a pair's latest value; null if it is undecodable or names another pair. */
function decodeOwn(runKey: RunKey, pair: string, value: Buffer): DecodedSampleResult | null {
  try {
    const record = decodeSampleResult(value);
    const own =
      record.run_id === runKey.runId &&
      record.benchmark_id === runKey.benchmarkId &&
      record.model === runKey.model &&
      pairKey(record.sample_index, record.epoch) === pair;
    return own ? record : null;
  } catch {
    return null; // counted as undecodable: the pair is evaluated again
  }
}

/** Refuse records of another configuration (unless accepted); how many carry none. */
function checkConfig(runKey: RunKey, records: DecodedSampleResult[], options: LoadOptions): number {
  const unconfigured = records.filter((r) => r.config_fingerprint === null).length;
  const wanted = options.configFingerprint;
  if (wanted === undefined || wanted === null || options.acceptConfigChange) {
    return unconfigured;
  }
  const others = records.filter((r) => r.config_fingerprint !== null && r.config_fingerprint !== wanted);
  if (others.length > 0) {
    throw new ConfigChangedError(
      `${describe(runKey)}: ${others.length} durable record(s) were made under another configuration ` +
        `(config_fingerprint ${others[0]!.config_fingerprint}, this run's ${wanted}); use a new run id, ` +
        "or load with acceptConfigChange to reuse them as they are",
    );
  }
  return unconfigured;
}

function kafkaErrorType(error: unknown): string | undefined {
  for (let e: unknown = error; e !== undefined && e !== null; ) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === "string") {
      return type;
    }
    e = (e as { originalError?: unknown; cause?: unknown }).originalError ?? (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function describe(runKey: RunKey): string {
  return `${runKey.runId} / ${runKey.benchmarkId} / ${runKey.model}`;
}
