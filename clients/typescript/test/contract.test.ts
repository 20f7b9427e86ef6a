/** Bad records, keys and bytes are refused in one line naming the problem. */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  decodeSampleResult,
  DecodeError,
  encodeRunKey,
  encodeSampleResult,
  partitionFor,
  recordKey,
  SchemaError,
  type SampleResult,
} from "../src/index.js";

const VALID: SampleResult = {
  format_version: 1,
  run_id: "r",
  benchmark_id: "b",
  model: "m/x",
  sample_index: 3,
  epoch: 1,
  sample_id: "s3",
  status: "completed",
  created_at: 1_796_023_812_345,
  epochs: 2,
  score: { value: "C", metrics: new Map([["10", 1], ["2", 0.5]]) },
  input: "q",
};

function refused(change: Partial<SampleResult>, pattern: RegExp): void {
  assert.throws(() => encodeSampleResult({ ...VALID, ...change }), (error: unknown) => {
    assert.ok(error instanceof SchemaError, String(error));
    assert.match(error.message, pattern);
    assert.equal(error.message.split("\n").length, 1);
    return true;
  });
}

test("records that break the contract are refused before any byte is written", () => {
  refused({ epoch: 2 }, /epoch must be < epochs \(epoch=2, epochs=2\)/);
  refused({ status: "degraded" }, /error is required when status is 'degraded'/);
  refused({ error: { kind: "k", message: "m" } }, /error must be null when status is 'completed'/);
  refused({ config: "{}" }, /config and config_fingerprint are set together/);
  refused({ config: "{not json", config_fingerprint: "f" }, /SampleResult\.config must be JSON text/);
  refused({ sample_index: -1 }, /SampleResult\.sample_index must be an integer in \[0, 2147483647\]/);
  refused({ sample_index: 1.5 }, /SampleResult\.sample_index does not fit the schema \(got 1\.5\)/);
  refused({ run_id: "a\u202eb" }, /RunKey\.run_id contains a control character, U\+202E/);
  refused({ input: "\ud800" }, /SampleResult\.input is not encodable as UTF-8/);
  refused({ usage: { input_tokens: 1, output_tokens: 1, total_tokens: 2, total_cost: 1 }, spent_cost: 0.5 }, /spent_cost must be >= usage\.total_cost/);
  refused({ format_version: 2 }, /unknown format_version 2/);
});

test("a Map's metric order is written and read back, integer-like names included", () => {
  const decoded = decodeSampleResult(encodeSampleResult(VALID));
  assert.deepEqual([...decoded.score.metrics.keys()], ["10", "2"]);
  assert.equal(decoded.selected_samples, null);
  assert.deepEqual(decoded.messages, []);
});

test("longs beyond 2^53 are written exactly and read back as bigints", () => {
  const pid = 2n ** 63n - 1n;
  const decoded = decodeSampleResult(encodeSampleResult({ ...VALID, worker: { host: "h", pid } }));
  assert.equal(decoded.worker?.pid, pid);
});

test("bytes that are not one of our records are a DecodeError saying why", () => {
  const raw = encodeSampleResult(VALID);
  const cases: [Uint8Array, RegExp][] = [
    [raw.subarray(0, 5), /not a single-object value/],
    [Uint8Array.from([0, 0, 0, 0, 1, 2]), /registry-framed value/],
    [Uint8Array.from([0xc3, 0x01, 1, 2, 3, 4, 5, 6, 7, 8, 0]), /unknown schema fingerprint 0102030405060708/],
    [Uint8Array.from([...raw, 0]), /1 trailing bytes after the Avro body/],
    [raw.subarray(0, raw.length - 1), /truncated Avro body|malformed Avro body/],
  ];
  for (const [bytes, pattern] of cases) {
    assert.throws(() => decodeSampleResult(bytes), (error: unknown) => error instanceof DecodeError && pattern.test(error.message));
  }
});

test("keys and partitions refuse what Python refuses", () => {
  assert.throws(() => encodeRunKey({ runId: "", benchmarkId: "b", model: "m" }), /RunKey\.run_id must be a non-empty string/);
  assert.throws(() => encodeRunKey({ runId: "..", benchmarkId: "b", model: "m" }), /must not be '\.\.'/);
  assert.throws(() => recordKey({ runId: "r", benchmarkId: "b", model: "m" }, -1, 0), /sample_index must be an integer in \[0, 2\*\*63\)/);
  assert.throws(() => partitionFor({ runId: "r", benchmarkId: "b", model: "m" }, 0), /partitions must be an integer >= 1/);
  assert.equal(new TextDecoder().decode(recordKey({ runId: "r", benchmarkId: "b", model: "m" }, 2n ** 63n - 1n, 0)), "r/b/m/9223372036854775807/0");
});
