/** Every golden vector of schemas/conformance.json, encoded and decoded byte for byte. */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  decodeSampleResult,
  encodeRunKey,
  encodeSampleResult,
  partitionFor,
  recordKey,
  schemaFingerprint,
  type SampleResult,
} from "../src/index.js";
import { fromJson, goldenVectors } from "./support.js";

const VECTORS = goldenVectors();
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

test("the shipped schemas have the pinned CRC-64-AVRO fingerprints", () => {
  for (const [name, hex] of Object.entries(VECTORS.schemas)) {
    const version = Number(/^SampleResult\.v(\d+)$/.exec(name)![1]);
    assert.equal(schemaFingerprint(version), hex, name);
  }
});

test("run keys, record keys and partitions are the golden ones", () => {
  assert.ok(VECTORS.keys.length >= 4);
  for (const vector of VECTORS.keys) {
    const { run_id: runId, benchmark_id: benchmarkId, model } = vector.run_key;
    const runKey = { runId, benchmarkId, model };
    assert.equal(text(encodeRunKey(runKey)), vector.encoded_run_key);
    assert.equal(text(recordKey(runKey, 3, 0)), vector.key_sample_3_epoch_0);
    assert.equal(partitionFor(runKey, VECTORS.partitions), vector.partition);
  }
});

test("every record vector encodes to its bytes under its schema version", () => {
  assert.deepEqual(new Set(VECTORS.records.map((v) => v.schema_version)), new Set([1, 2, 3]));
  for (const vector of VECTORS.records) {
    const datum = fromJson(vector.datum) as SampleResult;
    const raw = encodeSampleResult(datum, vector.schema_version);
    assert.equal(Buffer.from(raw).toString("hex"), vector.single_object_hex, vector.name);
    const { run_id: runId, benchmark_id: benchmarkId, model } = datum;
    assert.equal(text(recordKey({ runId, benchmarkId, model }, datum.sample_index, datum.epoch)), vector.key);
  }
});

test("every record vector decodes to its datum, and the newest re-encodes to its bytes", () => {
  for (const vector of VECTORS.records) {
    const raw = Buffer.from(vector.single_object_hex, "hex");
    const decoded = decodeSampleResult(raw);
    const expected = fromJson(vector.datum) as Record<string, unknown>;
    // An older datum lacks newer fields: they decode to their defaults and are not compared.
    assertSubset(normalise(expected), normalise(decoded), vector.name);
    const again = encodeSampleResult(decoded);
    const sameVersion = vector.schema_version === 3;
    assert.equal(sameVersion, Buffer.from(again).equals(raw), vector.name);
    assert.deepEqual(normalise(decodeSampleResult(again)), normalise(decoded), vector.name);
  }
});

/** Every field of `expected` (recursively) has its value in `actual`. */
function assertSubset(expected: unknown, actual: unknown, where: string): void {
  if (typeof expected === "object" && expected !== null && !Array.isArray(expected)) {
    assert.equal(typeof actual, "object", where);
    for (const [field, value] of Object.entries(expected)) {
      assertSubset(value, (actual as Record<string, unknown>)[field], `${where}.${field}`);
    }
  } else if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual) && actual.length === expected.length, where);
    expected.forEach((item, i) => assertSubset(item, (actual as unknown[])[i], `${where}.${i}`));
  } else {
    assert.deepEqual(actual, expected, where);
  }
}

/** Values compared as plain data: Maps as objects, byte arrays as hex. */
function normalise(value: unknown): unknown {
  if (value instanceof Map) {
    return Object.fromEntries([...value.entries()].map(([k, v]) => [k, normalise(v)]));
  }
  if (value instanceof Uint8Array) {
    return { hex: Buffer.from(value).toString("hex") };
  }
  if (Array.isArray(value)) {
    return value.map(normalise);
  }
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(v)]));
  }
  return value;
}
