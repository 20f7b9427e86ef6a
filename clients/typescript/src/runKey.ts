/** Run keys, record keys and partitions: the same bytes as Python's resultlog.schemas.keys. */
import { blake2b } from "@noble/hashes/blake2.js";
import { SchemaError } from "./errors.js";
import { isLong, type Long } from "./long.js";

/** The identity of one evaluation run. */
export interface RunKey {
  runId: string;
  benchmarkId: string;
  model: string;
}

// C0 and C1 controls, bidi marks, embeddings, overrides and isolates, line and paragraph
// separators: refused in a run key part, as the Python RunKey refuses them.
const REFUSED = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/u;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const MAX_LONG = 2n ** 63n - 1n;

/** Refuse a run key part that cannot round-trip through a Kafka key (one line, naming it). */
export function checkRunKeyPart(name: string, value: unknown): string {
  if (typeof value !== "string") {
    throw new SchemaError(`RunKey.${name} must be a string, got ${typeof value}`);
  }
  if (value.length === 0) {
    throw new SchemaError(`RunKey.${name} must be a non-empty string`);
  }
  if (!value.isWellFormed()) {
    throw new SchemaError(`RunKey.${name} is not encodable as UTF-8 (a lone surrogate)`);
  }
  if (value === "." || value === "..") {
    throw new SchemaError(`RunKey.${name} must not be '${value}': links to it would not work`);
  }
  const found = REFUSED.exec(value);
  if (found !== null) {
    const code = found[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
    throw new SchemaError(
      `RunKey.${name} contains a control character, U+${code}, at position ${found.index} ` +
        "(control and bidi characters are refused)",
    );
  }
  return value;
}

/** Percent-encode every UTF-8 byte except RFC 3986 unreserved ones (Python's quote(safe="")). */
function quote(part: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(part)) {
    const char = String.fromCharCode(byte);
    out += UNRESERVED.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

/** The run-summaries key `run_id/benchmark_id/model`, each part percent-encoded, as bytes. */
export function encodeRunKey(runKey: RunKey): Uint8Array {
  const parts = [
    checkRunKeyPart("run_id", runKey.runId),
    checkRunKeyPart("benchmark_id", runKey.benchmarkId),
    checkRunKeyPart("model", runKey.model),
  ];
  return new TextEncoder().encode(parts.map(quote).join("/"));
}

function checkIndex(name: string, value: Long): bigint {
  if (!isLong(value) || BigInt(value) < 0n || BigInt(value) > MAX_LONG) {
    throw new SchemaError(`${name} must be an integer in [0, 2**63), got ${String(value)}`);
  }
  return BigInt(value);
}

/** The sample-results key `run_id/benchmark_id/model/sample_index/epoch`. `runKey` is a
 * RunKey or its encoding (encodeRunKey's bytes). */
export function recordKey(runKey: RunKey | Uint8Array, sampleIndex: Long, epoch: Long): Uint8Array {
  const prefix = runKey instanceof Uint8Array ? runKey : encodeRunKey(runKey);
  const tail = `/${checkIndex("sample_index", sampleIndex)}/${checkIndex("epoch", epoch)}`;
  const out = new Uint8Array(prefix.length + tail.length);
  out.set(prefix);
  out.set(new TextEncoder().encode(tail), prefix.length);
  return out;
}

/** The byte prefix every sample-results key of this run key starts with (ends in "/"). */
export function runKeyPrefix(runKey: RunKey): Uint8Array {
  const encoded = encodeRunKey(runKey);
  const out = new Uint8Array(encoded.length + 1);
  out.set(encoded);
  out[encoded.length] = 0x2f;
  return out;
}

/** The partition of every record of this run key: the first 8 bytes of BLAKE2b (digest size
 * 8) of the encoded run key, read big-endian, mod `partitions`. */
export function partitionFor(runKey: RunKey | Uint8Array, partitions: number): number {
  if (!Number.isSafeInteger(partitions) || partitions < 1) {
    throw new SchemaError(`partitions must be an integer >= 1, got ${String(partitions)}`);
  }
  const encoded = runKey instanceof Uint8Array ? runKey : encodeRunKey(runKey);
  const digest = blake2b(encoded, { dkLen: 8 });
  const value = new DataView(digest.buffer, digest.byteOffset, 8).getBigUint64(0, false);
  return Number(value % BigInt(partitions));
}

/** The sample index and epoch of a key of this run key; null for a key of another run key or
 * one that is not canonical. */
export function keyIndexes(prefix: Uint8Array, key: Uint8Array): [number, number] | null {
  if (key.length <= prefix.length || prefix.some((byte, i) => key[i] !== byte)) {
    return null;
  }
  const match = /^(0|[1-9][0-9]*)\/(0|[1-9][0-9]*)$/.exec(new TextDecoder().decode(key.subarray(prefix.length)));
  if (match === null) {
    return null;
  }
  const [sampleIndex, epoch] = [Number(match[1]), Number(match[2])];
  return Number.isSafeInteger(sampleIndex) && Number.isSafeInteger(epoch) ? [sampleIndex, epoch] : null;
}
