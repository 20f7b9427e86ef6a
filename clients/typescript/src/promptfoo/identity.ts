/**
 * What names and identifies a promptfoo run: its run key and its configuration.
 *
 * The configuration is what shapes the answers and their grades: the wrapped provider and its
 * settings (endpoint included, secrets redacted), the prompts, the tests with their vars and
 * assertions, the default test. Not the repeat count (a run's shape, as epochs are), not where
 * the config file lies, not concurrency or retries.
 */
import { basename } from "node:path";
import { ResultLogError } from "../errors.js";
import { checkRunKeyPart, type RunKey } from "../runKey.js";
import { canonicalJson, sha256Hex } from "./canonical.js";
import type { Prompt, TestCase } from "./types.js";

export const CONFIG_FORMAT = 1;
const SECRET_NAME = /key|token|secret|password|credential|header/i;
const REDACTED = "<redacted>";
// Settings that change how requests travel or where promptfoo resolves files, never what a
// model answers.
const TRANSPORT = new Set(["basePath", "maxRetries", "timeout", "maxConcurrency", "delay"]);

/** A promptfoo config the integration cannot map, or a run it must not start. */
export class PromptfooError extends ResultLogError {}

/** The canonical JSON of a run's configuration and its sha256 fingerprint. */
export interface RunConfig {
  canonical: string;
  fingerprint: string;
}

/** What the configuration of one provider's run is made of. */
export interface ConfigParts {
  description: string;
  providerId: string;
  providerConfig: Record<string, unknown> | undefined;
  prompts: Prompt[];
  tests: TestCase[];
  defaultTest: unknown;
}

/** The run's configuration as the records carry it. */
export function runConfig(parts: ConfigParts): RunConfig {
  const canonical = canonicalJson({
    format: CONFIG_FORMAT,
    harness: "promptfoo",
    description: parts.description,
    provider: { id: parts.providerId, config: redacted(parts.providerConfig ?? {}) },
    prompts: parts.prompts.map((p) => ({ label: p.label, raw: p.raw, config: p.config ?? null })),
    tests: parts.tests.map(withoutOwnMetadata),
    default_test: parts.defaultTest ?? null,
  });
  return { canonical, fingerprint: sha256Hex(canonical) };
}

/** A provider's settings without secrets' values and without transport settings. */
export function redacted(config: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(config)) {
    if (!TRANSPORT.has(name)) {
      kept[name] = SECRET_NAME.test(name) ? REDACTED : value;
    }
  }
  return kept;
}

/** The benchmark part of the run key: the config's description, else its file's name. */
export function benchmarkName(description: string | undefined, argv: readonly string[] = process.argv): string {
  if (description !== undefined && description.trim() !== "") {
    return description.trim();
  }
  const config = optionValue(argv, ["-c", "--config"]);
  return basename(config ?? "promptfooconfig.yaml");
}

/** The run id: RESULTLOG_RUN_ID, else the resultlog provider's `runId` setting. */
export function runIdOf(env: NodeJS.ProcessEnv, configured: unknown): string {
  const runId = env["RESULTLOG_RUN_ID"] || (typeof configured === "string" ? configured : "");
  if (runId === "") {
    throw new PromptfooError("no run id: set RESULTLOG_RUN_ID, or runId in the resultlog provider's config");
  }
  return runId;
}

/** The run key of one provider's cases; SchemaError for a part no reader can handle. */
export function runKeyOf(runId: string, benchmark: string, providerId: string): RunKey {
  checkRunKeyPart("run_id", runId);
  checkRunKeyPart("benchmark_id", benchmark);
  checkRunKeyPart("model", providerId);
  return { runId, benchmarkId: benchmark, model: providerId };
}

/** How many times each case runs: promptfoo's `--repeat N` (1 without it). */
export function repeatCount(argv: readonly string[] = process.argv): number {
  const value = optionValue(argv, ["--repeat"]);
  if (value === undefined) {
    return 1;
  }
  const repeat = Number(value);
  if (!Number.isSafeInteger(repeat) || repeat < 1) {
    throw new PromptfooError(`--repeat must be an integer >= 1, got ${value}`);
  }
  return repeat;
}

/** The value of a command-line option given as `-o V`, `--opt V` or `--opt=V`. */
function optionValue(argv: readonly string[], names: string[]): string | undefined {
  let found: string | undefined;
  argv.forEach((arg, i) => {
    for (const name of names) {
      if (arg === name && i + 1 < argv.length) {
        found = argv[i + 1];
      } else if (arg.startsWith(`${name}=`)) {
        found = arg.slice(name.length + 1);
      }
    }
  });
  return found;
}

/** A test as its config file gives it (the position this integration stamps is not config). */
function withoutOwnMetadata(test: TestCase): TestCase {
  const metadata = { ...(test.metadata ?? {}) };
  delete metadata[POSITION];
  return { ...test, metadata };
}

/** The metadata name under which each test carries its position in the config. */
export const POSITION = "resultlog_position";
