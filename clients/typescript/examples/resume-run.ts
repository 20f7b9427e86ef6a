/**
 * A harness's resume, as the seed's SampleResultStore does it: load the run key's completed
 * entries, evaluate only the pairs not in the skip-list, write each one durably, then the
 * degraded outcomes. Prints one JSON line: the skip-list, the pairs evaluated, the accumulator.
 *
 * node dist/examples/resume-run.js --run-id R --benchmark B --model M --samples N --epochs E
 *   [--load-only] [--config TEXT --config-fingerprint FP] [--dataset-size N] [--degrade-every K]
 */
import { parseArgs } from "node:util";
import { KafkaResultStore, pairKey, ResultLogError, type SampleResult } from "../src/index.js";

function options() {
  const { values } = parseArgs({
    options: {
      "run-id": { type: "string" },
      benchmark: { type: "string" },
      model: { type: "string" },
      samples: { type: "string" },
      epochs: { type: "string", default: "1" },
      "dataset-size": { type: "string" },
      config: { type: "string" },
      "config-fingerprint": { type: "string" },
      "degrade-every": { type: "string", default: "0" },
      "load-only": { type: "boolean", default: false },
    },
    strict: true,
  });
  for (const name of ["run-id", "benchmark", "model", "samples"] as const) {
    if (!values[name]) {
      throw new RangeError(`--${name} is required`);
    }
  }
  const count = (name: "samples" | "epochs" | "degrade-every" | "dataset-size", low: number) => {
    const value = Number(values[name]);
    if (!Number.isSafeInteger(value) || value < low) {
      throw new RangeError(`--${name} must be an integer >= ${low}, got ${values[name]}`);
    }
    return value;
  };
  const samples = count("samples", 1);
  return {
    runKey: { runId: values["run-id"]!, benchmarkId: values.benchmark!, model: values.model! },
    samples,
    epochs: count("epochs", 1),
    datasetSize: values["dataset-size"] === undefined ? samples : count("dataset-size", samples),
    degradeEvery: count("degrade-every", 0),
    config: values.config ?? null,
    configFingerprint: values["config-fingerprint"] ?? null,
    loadOnly: values["load-only"],
  };
}

async function main(): Promise<void> {
  const o = options();
  const store = await KafkaResultStore.connect();
  try {
    const state = await store.load(o.runKey, { epochs: o.epochs, configFingerprint: o.configFingerprint });
    const evaluated: string[] = [];
    const degraded: SampleResult[] = [];
    let correct = state.seeds.filter((r) => r.score.value === "C").length; // the seeded accumulator
    if (!o.loadOnly) {
      for (let index = 0; index < o.samples; index += 1) {
        for (let epoch = 0; epoch < o.epochs; epoch += 1) {
          if (state.skipList.has(pairKey(index, epoch))) {
            continue;
          }
          evaluated.push(pairKey(index, epoch));
          const failed = o.degradeEvery > 0 && (index * o.epochs + epoch) % o.degradeEvery === 0;
          const record = outcome(o, index, epoch, failed);
          if (failed) {
            degraded.push(record); // deferred: written once every pair has settled
          } else {
            await store.write(record);
            correct += record.score.value === "C" ? 1 : 0;
          }
        }
      }
    }
    const deferred = await store.writeDegraded(o.runKey, degraded);
    const line = {
      skip_list: [...state.skipList].sort(),
      degraded_loaded: state.degraded.map((r) => pairKey(r.sample_index, r.epoch)).sort(),
      evaluated,
      degraded_written: deferred.written.length,
      correct,
      undecodable: state.undecodable,
      out_of_range: state.outOfRange,
    };
    console.log(JSON.stringify(line));
  } finally {
    await store.close();
  }
}

function outcome(o: ReturnType<typeof options>, index: number, epoch: number, failed: boolean): SampleResult {
  return {
    format_version: 1,
    run_id: o.runKey.runId,
    benchmark_id: o.runKey.benchmarkId,
    model: o.runKey.model,
    sample_index: index,
    epoch,
    sample_id: `${o.runKey.benchmarkId}-${String(index).padStart(4, "0")}`,
    status: failed ? "degraded" : "completed",
    created_at: Date.now(),
    epochs: o.epochs,
    dataset_size: o.datasetSize,
    usage: failed ? null : { input_tokens: 8, output_tokens: 1, total_tokens: 9, total_cost: 0.0002 },
    attempts: 1,
    spent_cost: failed ? 0 : 0.0002,
    config: o.config,
    config_fingerprint: o.configFingerprint,
    score: { value: failed ? "S" : index % 2 === 0 ? "C" : "I", explanation: "typescript harness" },
    error: failed ? { kind: "server_error", message: "the model answered 503", http_status: 503 } : null,
    input: `sample ${index}`,
    harness: { name: "resultlog-ts-example", version: "0.1.0" },
  };
}

main().catch((error: unknown) => {
  const known = error instanceof ResultLogError || error instanceof RangeError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS");
  console.error(`resume-run: error: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = known ? 2 : 1;
});
