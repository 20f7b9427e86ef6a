/** One eval's state in this process: the store, and per wrapped provider its run key, lease,
 * configuration and the durable cases it serves. Set up by beforeAll, ended by afterAll. */
import { readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import type { DecodedSampleResult, SampleResult } from "../record.js";
import type { RunKey } from "../runKey.js";
import { KafkaResultStore, pairKey } from "../store.js";
import { PromptfooError, type RunConfig } from "./identity.js";
import type { LeaseClient, RunLease } from "./lease.js";
import type { ProviderResponse, TestCase } from "./types.js";

/** What the wrapper did for a case, found again by afterEach through the case's test object. */
export interface CallRecord {
  repeatIndex: number;
  /** The wrapped provider's own response (before promptfoo's transforms); none when served. */
  response?: ProviderResponse;
  /** Served from the log: already durable, not written again. */
  served: boolean;
  /** Refused by resultlog itself (the lease was lost): nothing to write. */
  refused: boolean;
}

/** One wrapped provider's run in this eval. */
export class ProviderRun {
  readonly degraded: SampleResult[] = [];
  written = 0;
  served = 0;
  called = 0;

  constructor(
    readonly runKey: RunKey,
    readonly config: RunConfig,
    readonly lease: RunLease,
    readonly seeds: ReadonlyMap<string, DecodedSampleResult>,
  ) {}

  /** The durable completed record of a case, if there is one. */
  seed(sampleIndex: number, epoch: number): DecodedSampleResult | undefined {
    return this.seeds.get(pairKey(sampleIndex, epoch));
  }
}

/** The eval's shape and connections. */
export class Session {
  readonly runs = new Map<object, ProviderRun>();
  readonly calls = new WeakMap<TestCase, CallRecord>();

  constructor(
    readonly store: KafkaResultStore,
    readonly leases: LeaseClient,
    readonly epochs: number,
    readonly testCount: number,
    readonly promptLabels: readonly string[],
    readonly harnessVersion: string,
  ) {}

  /** The run of a wrapped provider, or an error saying the hooks are missing. */
  runOf(provider: object): ProviderRun {
    const run = this.runs.get(provider);
    if (run === undefined) {
      throw new PromptfooError("this provider was not set up by the resultlog beforeAll hook: add the resultlog hooks to `extensions`");
    }
    return run;
  }

  /** Where a case sits: (sample index, sample id) from the test's position and its prompt. */
  place(position: number, promptLabel: string): { sampleIndex: number; sampleId: string } {
    const prompt = this.promptLabels.indexOf(promptLabel);
    if (prompt < 0) {
      throw new PromptfooError(`prompt ${JSON.stringify(promptLabel)} is not one of the config's prompts`);
    }
    const count = this.promptLabels.length;
    const sampleId = count > 1 ? `test-${position}/prompt-${prompt}` : `test-${position}`;
    return { sampleIndex: position * count + prompt, sampleId };
  }

  /** Every case's sample index lies below this: tests times prompts. */
  get datasetSize(): number {
    return this.testCount * this.promptLabels.length;
  }
}

let current: Session | null = null;

/** The session beforeAll opened; an error when the hooks are not configured. */
export function session(): Session {
  if (current === null) {
    throw new PromptfooError(
      "the resultlog hooks are not set up: list file://…:beforeAll, :afterEach and :afterAll of the resultlog hooks in `extensions`",
    );
  }
  return current;
}

export function setSession(value: Session | null): void {
  current = value;
}

/** The version of the promptfoo running this process (its package.json above the CLI). */
export function promptfooVersion(argv: readonly string[] = process.argv): string {
  try {
    for (let dir = dirname(realpathSync(argv[1] ?? "")); dir !== dirname(dir); dir = dirname(dir)) {
      try {
        const found = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name?: string; version?: string };
        if (found.name === "promptfoo" && typeof found.version === "string") {
          return found.version;
        }
      } catch {
        // no package.json here: look further up
      }
    }
  } catch {
    // not run from a file (a REPL): unknown
  }
  return "unknown";
}
