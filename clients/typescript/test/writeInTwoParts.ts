/** A writer the interop tests stop between two parts: it writes `--records` records of run
 * `--run-id` (benchmark ts-demo, model ts/demo), says `half` after the first half, waits for
 * a line on stdin, then writes the rest: `node dist/test/writeInTwoParts.js --run-id R --records N`. */
import { createInterface } from "node:readline/promises";
import { parseArgs } from "node:util";
import { KafkaResultStore, ResultLogError, type SampleResult } from "../src/index.js";

function record(runId: string, index: number, total: number): SampleResult {
  return {
    format_version: 1,
    run_id: runId,
    benchmark_id: "ts-demo",
    model: "ts/demo",
    sample_index: index,
    epoch: 0,
    sample_id: `ts-demo-${index}`,
    status: "completed",
    created_at: Date.now(),
    epochs: 1,
    dataset_size: total,
    score: { value: "C", answer: String(index), explanation: "demo" },
    input: `What is ${index} + 0?`,
    target: String(index),
    harness: { name: "resultlog-ts-test", version: "0.1.0" },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { "run-id": { type: "string" }, records: { type: "string" } } });
  const runId = values["run-id"] ?? "ts-two-parts";
  const total = Number(values.records ?? "10");
  const store = await KafkaResultStore.connect();
  try {
    for (let index = 0; index < total; index += 1) {
      if (index === Math.floor(total / 2)) {
        console.log("half");
        const lines = createInterface({ input: process.stdin });
        await lines[Symbol.asyncIterator]().next();
        lines.close();
      }
      await store.write(record(runId, index, total));
    }
  } finally {
    await store.close();
  }
  console.log(`wrote ${total} records of ${runId}`);
}

main().catch((error: unknown) => {
  console.error(`writeInTwoParts: error: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = error instanceof ResultLogError ? 2 : 1;
});
