/** The promptfoo integration's pure parts: canonical JSON, configuration identity, the
 * mapping of a finished case to a SampleResult, command-line shape, lease values. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeSampleResult, encodeSampleResult, type DecodedSampleResult } from "../src/index.js";
import {
  benchmarkName,
  canonicalJson,
  FAILURE_ERROR,
  parseLease,
  repeatCount,
  runConfig,
  sampleResult,
  servedResponse,
  type CasePlace,
  type ConfigParts,
  type EvaluateResult,
} from "@resultlog/client/promptfoo";

test("canonical JSON is Python's json.dumps(sort_keys, compact, ensure_ascii=False) byte for byte", () => {
  const value = {
    b: [1, 0.1, 1e-7, 1e16, 123.456, -0.5, 2.5e-5, 1.5e300],
    a: { "\u{1F600}": 1, "\uffff": 2, z: null },
    s: 'q"\\\n\t\u0001\u2028é',
    t: true,
  };
  // What Python printed for the same value (keys by code point: U+FFFF before U+1F600).
  const python = '{"a":{"z":null,"\uffff":2,"\u{1F600}":1},"b":[1,0.1,1e-07,1e+16,123.456,-0.5,2.5e-05,1.5e+300],"s":"q\\"\\\\\\n\\t\\u0001\u2028é","t":true}';
  assert.equal(canonicalJson(value), python);
  assert.throws(() => canonicalJson({ x: Number.NaN }), /\$\.x: NaN is not JSON/);
  assert.throws(() => canonicalJson({ x: "\ud800" }), /lone surrogate/);
});

const PARTS: ConfigParts = {
  description: "arithmetic",
  providerId: "openai:chat:m",
  providerConfig: { apiBaseUrl: "http://h/v1", apiKey: "sk-secret", temperature: 0, basePath: "/home/a", maxRetries: 3 },
  prompts: [{ raw: "Compute {{question}}", label: "arithmetic" }],
  tests: [{ vars: { question: "1 + 2" }, assert: [{ type: "contains", value: "is 3." }] }],
  defaultTest: { assert: [] },
};

test("the configuration keeps what shapes answers and grades, never secrets or where files lie", () => {
  const config = runConfig(PARTS);
  assert.match(config.canonical, /"apiKey":"<redacted>"/);
  assert.doesNotMatch(config.canonical, /sk-secret|basePath|maxRetries/);
  assert.match(config.fingerprint, /^[0-9a-f]{64}$/);
  const moved = runConfig({ ...PARTS, providerConfig: { ...PARTS.providerConfig, basePath: "/elsewhere", apiKey: "sk-other" } });
  assert.equal(moved.fingerprint, config.fingerprint);
  const stamped = runConfig({ ...PARTS, tests: [{ ...PARTS.tests[0]!, metadata: { resultlog_position: 0 } }] });
  assert.equal(stamped.fingerprint, runConfig({ ...PARTS, tests: [{ ...PARTS.tests[0]!, metadata: {} }] }).fingerprint);
  const changed = runConfig({ ...PARTS, tests: [{ vars: { question: "1 + 2" }, assert: [{ type: "contains", value: "3" }] }] });
  assert.notEqual(changed.fingerprint, config.fingerprint);
  const hotter = runConfig({ ...PARTS, providerConfig: { ...PARTS.providerConfig, temperature: 0.7 } });
  assert.notEqual(hotter.fingerprint, config.fingerprint);
});

test("the run's name and shape come from the description or the config file, and --repeat", () => {
  assert.equal(benchmarkName(" arithmetic ", []), "arithmetic");
  assert.equal(benchmarkName(undefined, ["node", "promptfoo", "eval", "-c", "dir/mine.yaml"]), "mine.yaml");
  assert.equal(benchmarkName("", ["node", "promptfoo", "eval", "--config=x.yml"]), "x.yml");
  assert.equal(repeatCount(["node", "promptfoo", "eval"]), 1);
  assert.equal(repeatCount(["node", "promptfoo", "eval", "--repeat", "3"]), 3);
  assert.throws(() => repeatCount(["eval", "--repeat", "0"]), /--repeat must be an integer >= 1, got 0/);
});

const PLACE: CasePlace = {
  runKey: { runId: "pf-1", benchmarkId: "arithmetic", model: "openai:chat:m" },
  config: runConfig(PARTS),
  sampleIndex: 7,
  sampleId: "test-7",
  epoch: 1,
  epochs: 2,
  datasetSize: 24,
  harnessVersion: "0.120.27",
};

function result(change: Partial<EvaluateResult> = {}): EvaluateResult {
  return {
    provider: { id: "openai:chat:m" },
    prompt: { raw: "Compute 1 + 2 and answer with the number.", label: "arithmetic" },
    vars: { question: "1 + 2" },
    response: { output: "The answer is 3.", tokenUsage: { prompt: 12, completion: 4, total: 16 }, cost: 0.000016 },
    success: true,
    failureReason: 0,
    score: 1,
    namedScores: { exact: 1 },
    latencyMs: 53.4,
    cost: 0.000016,
    gradingResult: { pass: true, score: 1, reason: "All assertions passed", componentResults: [] },
    promptIdx: 0,
    testIdx: 15,
    testCase: { description: "1 + 2", vars: { question: "1 + 2" }, assert: [{ type: "contains", value: "is 3.", metric: "exact" }] },
    ...change,
  };
}

function roundTrip(change: Partial<EvaluateResult> = {}): DecodedSampleResult {
  return decodeSampleResult(encodeSampleResult(sampleResult(result(change), PLACE, undefined)));
}

test("a passed case is C with its named scores, usage, cost, vars and assertions", () => {
  const record = roundTrip();
  assert.deepEqual([record.sample_index, record.epoch, record.epochs, record.sample_id], [7n, 1n, 2n, "test-7"].map((v, i) => (i < 3 ? Number(v) : v)));
  assert.equal(record.status, "completed");
  assert.deepEqual([record.score.value, record.score.numeric, record.score.answer], ["C", 1, "The answer is 3."]);
  assert.deepEqual([...record.score.metrics], [["exact", 1]]);
  assert.deepEqual(
    [record.usage?.input_tokens, record.usage?.output_tokens, record.usage?.total_tokens, record.usage?.total_cost].map(Number),
    [12, 4, 16, 0.000016],
  );
  assert.equal(record.spent_cost, 0.000016);
  assert.equal(record.config_fingerprint, PLACE.config.fingerprint);
  assert.deepEqual([record.harness?.name, record.harness?.version, record.target], ["promptfoo", "0.120.27", "is 3."]);
  const payload = JSON.parse(new TextDecoder().decode(record.harness_payload!)) as Record<string, any>;
  assert.deepEqual(payload["test"]["vars"], { question: "1 + 2" });
  assert.deepEqual(payload["test"]["assert"], [{ type: "contains", value: "is 3.", metric: "exact" }]);
});

test("a failed assertion is I; a provider error is degraded (S), retried by a rerun", () => {
  const failed = roundTrip({ success: false, failureReason: 1, score: 0, namedScores: { exact: 0 } });
  assert.deepEqual([failed.status, failed.score.value, failed.score.numeric], ["completed", "I", 0]);
  const errored = roundTrip({ success: false, failureReason: FAILURE_ERROR, error: "429 Too Many Requests\nat stack", response: undefined });
  assert.deepEqual([errored.status, errored.score.value, errored.usage], ["degraded", "S", null]);
  assert.deepEqual([errored.error?.kind, errored.error?.message], ["provider_error", "429 Too Many Requests"]);
});

test("a served case answers the durable record's output, marked cached, at no cost", () => {
  const object = { answer: 3 };
  const record = roundTrip({ response: { output: object, tokenUsage: { prompt: 5, completion: 2, total: 7 } } });
  assert.equal(record.score.answer, '{"answer":3}');
  const served = servedResponse(record);
  assert.deepEqual(served.output, object);
  assert.deepEqual([served.cached, served.cost, served.tokenUsage?.total], [true, 0, 7]);
});

test("a lease value written by Python is read, one of another shape is not a lease", () => {
  const python =
    '{"host":"h","pid":12,"token":"00ff","process":null,"start":0,"end":24,"since_ms":1,"expires_ms":2,"claim_offset":5}';
  assert.deepEqual(parseLease(python), JSON.parse(python));
  assert.equal(parseLease('{"host":"h"}'), null);
  assert.equal(parseLease("not json"), null);
});
