/** The contract's bounds and cross-field rules, as the Python models enforce them. */
import { SchemaError } from "./errors.js";
import { isLong, type Long } from "./long.js";
import { entriesOf } from "./orderedMap.js";
import { checkRunKeyPart } from "./runKey.js";
import type { SampleResult } from "./record.js";

const MAX_INDEX = 2 ** 31 - 1;
const MAX_TOKENS = 2 ** 32 - 1;
const MAX_MILLIS = 2 ** 32 - 1;
const MAX_COST_USD = 1e6;
const MAX_METRIC = 1e12;
const MAX_LONG = 2n ** 63n - 1n;
const MAX_HARNESS_PAYLOAD = 512 * 1024;
// Python datetimes span years 1 to 9999: the instants a created_at may name.
const MIN_MILLIS = -62135596800000;
const MAX_TIMESTAMP = 253402300799999;

type Check = (value: unknown) => string | null;

function intIn(low: bigint, high: bigint): Check {
  return (value) =>
    isLong(value) && BigInt(value) >= low && BigInt(value) <= high
      ? null
      : `must be an integer in [${low}, ${high}]`;
}

function realIn(low: number, high: number): Check {
  return (value) =>
    typeof value === "number" && Number.isFinite(value) && value >= low && value <= high
      ? null
      : `must be a finite number in [${low}, ${high}]`;
}

const nonEmpty: Check = (value) =>
  typeof value === "string" && value.length > 0 ? null : "must be a non-empty string";

const jsonText: Check = (value) => {
  try {
    JSON.parse(value as string);
    return null;
  } catch (exc) {
    return `must be JSON text: ${(exc as Error).message}`;
  }
};

const index = intIn(0n, BigInt(MAX_INDEX));
const positiveIndex = intIn(1n, BigInt(MAX_INDEX));
const tokens = intIn(0n, BigInt(MAX_TOKENS));
const cost = realIn(0, MAX_COST_USD);

/** Field path -> check, for fields present and not null ("*" walks an array or a map). */
const CHECKS: [string, Check][] = [
  ["format_version", (v) => (v === 1 ? null : `unknown format_version ${String(v)} (this writer knows 1)`)],
  ["sample_index", index],
  ["epoch", index],
  ["sample_id", nonEmpty],
  ["created_at", intIn(BigInt(MIN_MILLIS), BigInt(MAX_TIMESTAMP))],
  ["epochs", positiveIndex],
  ["dataset_size", index],
  ["selected_samples", positiveIndex],
  ["usage.input_tokens", tokens],
  ["usage.output_tokens", tokens],
  ["usage.total_tokens", tokens],
  ["usage.reasoning_tokens", tokens],
  ["usage.total_cost", cost],
  ["generation_time_ms", intIn(0n, BigInt(MAX_MILLIS))],
  ["attempts", index],
  ["spent_cost", cost],
  ["config_fingerprint", nonEmpty],
  ["score.numeric", realIn(0, 1)],
  ["score.metrics.*", realIn(-MAX_METRIC, MAX_METRIC)],
  ["score.trajectory", jsonText],
  ["error.kind", nonEmpty],
  ["error.http_status", intIn(100n, 599n)],
  ["chunk_index", index],
  ["worker.pid", intIn(0n, MAX_LONG)],
  ["messages.*.role", nonEmpty],
  ["messages.*.content_parts", jsonText],
  ["messages.*.tool_calls.*.name", nonEmpty],
  ["messages.*.tool_calls.*.arguments", jsonText],
  ["messages.*.reasoning_details", jsonText],
  ["messages.*.citations", jsonText],
  ["response_items", jsonText],
  ["metadata", jsonText],
  ["truncated", jsonText],
  ["config", jsonText],
  ["harness.name", nonEmpty],
  [
    "harness_payload",
    (v) =>
      (v as Uint8Array).length <= MAX_HARNESS_PAYLOAD
        ? null
        : `must be at most ${MAX_HARNESS_PAYLOAD} bytes, got ${(v as Uint8Array).length}`,
  ],
];

/** Every (path, value) a dotted path with "*" reaches in `value`. */
function reach(value: unknown, parts: string[], path: string): [string, unknown][] {
  if (value === null || value === undefined) {
    return [];
  }
  if (parts.length === 0) {
    return [[path, value]];
  }
  const [head, ...rest] = parts as [string, ...string[]];
  if (head === "*") {
    const items: [string, unknown][] = Array.isArray(value)
      ? value.map((item, i) => [String(i), item])
      : entriesOf(value as Record<string, unknown>);
    return items.flatMap(([name, item]) => reach(item, rest, `${path}.${name}`));
  }
  const next = (value as Record<string, unknown>)[head];
  return reach(next, rest, path ? `${path}.${head}` : head);
}

/** Refuse a record that breaks the contract: SchemaError naming the first field at fault. */
export function checkRecord(record: SampleResult, jsonTexts = true): void {
  for (const name of ["run_id", "benchmark_id", "model"] as const) {
    checkRunKeyPart(name, record[name]);
  }
  for (const [path, check] of CHECKS) {
    if (!jsonTexts && check === jsonText) {
      continue;
    }
    for (const [where, value] of reach(record, path.split("."), "")) {
      const problem = check(value);
      if (problem !== null) {
        throw new SchemaError(`SampleResult.${where} ${problem} (got ${shown(value)})`);
      }
    }
  }
  checkCrossFields(record);
}

function checkCrossFields(record: SampleResult): void {
  const num = (value: Long | null | undefined) => (value === null || value === undefined ? null : BigInt(value));
  const [epoch, epochs] = [BigInt(record.epoch), BigInt(record.epochs)];
  const [size, selected] = [num(record.dataset_size), num(record.selected_samples)];
  const fail = (reason: string) => {
    throw new SchemaError(`SampleResult ${reason}`);
  };
  if (epoch >= epochs) {
    fail(`epoch must be < epochs (epoch=${epoch}, epochs=${epochs})`);
  }
  if (size !== null && BigInt(record.sample_index) >= size) {
    fail(`sample_index must be < dataset_size (sample_index=${record.sample_index}, dataset_size=${size})`);
  }
  if (size !== null && selected !== null && selected > size) {
    fail(`selected_samples must be <= dataset_size (selected_samples=${selected}, dataset_size=${size})`);
  }
  const degraded = record.status === "degraded";
  const hasError = record.error !== null && record.error !== undefined;
  if (degraded && !hasError) {
    fail("error is required when status is 'degraded'");
  }
  if (!degraded && hasError) {
    fail("error must be null when status is 'completed'");
  }
  const kept = record.usage?.total_cost ?? 0;
  if (record.spent_cost !== null && record.spent_cost !== undefined && record.spent_cost < kept) {
    fail(`spent_cost must be >= usage.total_cost, which it includes (spent_cost=${record.spent_cost}, usage.total_cost=${kept})`);
  }
  if ((record.config ?? null) === null !== ((record.config_fingerprint ?? null) === null)) {
    fail("config and config_fingerprint are set together or not at all");
  }
}

function shown(value: unknown): string {
  const text = typeof value === "bigint" ? value.toString() : JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}
