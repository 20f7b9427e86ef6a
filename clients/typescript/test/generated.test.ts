/** Random valid records and run keys from the Python codec: the same bytes and partitions. */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  decodeSampleResult,
  encodeRunKey,
  encodeSampleResult,
  partitionFor,
  recordKey,
  type SampleResult,
} from "../src/index.js";
import { fromJson, runPython } from "./support.js";

const SEED = Number(process.env["RESULTLOG_TS_SEED"] ?? Math.floor(Math.random() * 2 ** 31));
const RECORDS = Number(process.env["RESULTLOG_TS_RECORDS"] ?? 200);
const KEYS = Number(process.env["RESULTLOG_TS_KEYS"] ?? 1000);

interface Generated {
  keys: {
    run_key: { runId: string; benchmarkId: string; model: string };
    encoded: string;
    sample_index: string;
    epoch: number;
    key: string;
    partitions: Record<string, number>;
  }[];
  records: { datum: unknown; hex: string }[];
}

function generate(): Generated {
  const dir = mkdtempSync(join(tmpdir(), "resultlog-ts-vectors-"));
  try {
    const file = join(dir, "vectors.json");
    runPython("generate_vectors.py", String(SEED), String(RECORDS), String(KEYS), file);
    return JSON.parse(readFileSync(file, "utf-8")) as Generated;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const generated = generate();
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

test(`${KEYS} random run keys: Python's encodings and partitions (seed ${SEED})`, () => {
  assert.equal(generated.keys.length, KEYS);
  for (const vector of generated.keys) {
    assert.equal(text(encodeRunKey(vector.run_key)), vector.encoded);
    assert.equal(text(recordKey(vector.run_key, BigInt(vector.sample_index), vector.epoch)), vector.key);
    for (const [partitions, partition] of Object.entries(vector.partitions)) {
      assert.equal(partitionFor(vector.run_key, Number(partitions)), partition, `${vector.encoded} mod ${partitions}`);
    }
  }
});

test(`${RECORDS} random valid records: Python's bytes exactly, and back (seed ${SEED})`, () => {
  assert.equal(generated.records.length, RECORDS);
  for (const vector of generated.records) {
    const datum = fromJson(vector.datum) as SampleResult;
    const raw = encodeSampleResult(datum);
    assert.equal(Buffer.from(raw).toString("hex"), vector.hex, `seed ${SEED}: ${JSON.stringify(vector.datum).slice(0, 200)}`);
    assert.deepEqual(encodeSampleResult(decodeSampleResult(raw)), raw);
  }
});
