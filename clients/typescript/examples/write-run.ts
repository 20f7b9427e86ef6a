/** Write N completed records of a run (benchmark ts-demo, model ts/demo) to
 * RESULTLOG_BOOTSTRAP_SERVERS, else the local stack's broker:
 * `node dist/examples/write-run.js --run-id R --records N`. */
import { parseArgs } from "node:util";
import { KafkaResultStore, ResultLogError, type SampleResult } from "../src/index.js";

const BENCHMARK = "ts-demo";
const MODEL = "ts/demo";
const USAGE = `usage: node dist/examples/write-run.js --run-id R --records N

Write N completed records of run R (benchmark ${BENCHMARK}, model ${MODEL}), as the Python
writer would. The broker: RESULTLOG_BOOTSTRAP_SERVERS, else the one \`resultlog up\` or
\`resultlog kafka up\` runs in the default directory, else 127.0.0.1:9092.

options:
  --run-id R     the run's id (required)
  --records N    how many records to write (an integer >= 1)
  -h, --help     show this help and exit`;

function options(): { runId: string; records: number } | null {
  const { values } = parseArgs({
    options: {
      "run-id": { type: "string" },
      records: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return null;
  }
  const runId = values["run-id"];
  const records = Number(values.records);
  if (!runId) {
    throw new RangeError("--run-id is required");
  }
  if (!Number.isSafeInteger(records) || records < 1 || records > 2 ** 31 - 1) {
    throw new RangeError(`--records must be an integer >= 1, got ${values.records ?? "nothing"}`);
  }
  return { runId, records };
}

function record(runId: string, index: number, total: number): SampleResult {
  const correct = index % 3 !== 0;
  return {
    format_version: 1,
    run_id: runId,
    benchmark_id: BENCHMARK,
    model: MODEL,
    sample_index: index,
    epoch: 0,
    sample_id: `ts-demo-${index}`,
    status: "completed",
    created_at: Date.now(),
    epochs: 1,
    dataset_size: total,
    usage: { input_tokens: 10, output_tokens: 2, total_tokens: 12, total_cost: 0.0001 },
    attempts: 1,
    spent_cost: 0.0001,
    score: { value: correct ? "C" : "I", answer: String(index), explanation: "demo" },
    input: `What is ${index} + 0?`,
    target: String(index),
    harness: { name: "resultlog-ts-example", version: "0.1.0" },
  };
}

async function main(): Promise<void> {
  const given = options();
  if (given === null) {
    return;
  }
  const { runId, records } = given;
  const store = await KafkaResultStore.connect();
  try {
    for (let index = 0; index < records; index += 1) {
      await store.write(record(runId, index, records));
    }
  } finally {
    await store.close();
  }
  console.log(`wrote ${records} records of ${runId} / ${BENCHMARK} / ${MODEL} to ${store.settings.resultsTopic}`);
}

main().catch((error: unknown) => {
  const known = error instanceof ResultLogError || error instanceof RangeError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
  console.error(`write-run: error: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = known ? 2 : 1;
});
