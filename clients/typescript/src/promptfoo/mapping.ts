/** One finished promptfoo case (test, prompt, provider, repeat) as a SampleResult. */
import { hostname } from "node:os";
import type { RunKey } from "../runKey.js";
import type { DecodedSampleResult, SampleResult, Usage } from "../record.js";
import type { RunConfig } from "./identity.js";
import { FAILURE_ERROR, type EvaluateResult, type ProviderResponse, type TokenUsage } from "./types.js";

/** Where a case sits in its run, and the run's shape. */
export interface CasePlace {
  runKey: RunKey;
  config: RunConfig;
  /** The test's position in the config (times the prompt count, plus the prompt's). */
  sampleIndex: number;
  sampleId: string;
  /** The repeat (0-based). */
  epoch: number;
  epochs: number;
  datasetSize: number;
  harnessVersion: string;
}

/** The record of a finished case: C/I from pass/fail, named scores as metrics, the provider's
 * raw output as the answer; a case whose provider failed is degraded (S), retried by a rerun. */
export function sampleResult(result: EvaluateResult, place: CasePlace, raw: ProviderResponse | undefined): SampleResult {
  const response = raw ?? result.response;
  const failed = result.failureReason === FAILURE_ERROR;
  const cost = response?.cost ?? result.cost ?? 0;
  return {
    format_version: 1,
    run_id: place.runKey.runId,
    benchmark_id: place.runKey.benchmarkId,
    model: place.runKey.model,
    sample_index: place.sampleIndex,
    epoch: place.epoch,
    sample_id: place.sampleId,
    status: failed ? "degraded" : "completed",
    created_at: Date.now(),
    epochs: place.epochs,
    dataset_size: place.datasetSize,
    selected_samples: place.datasetSize,
    usage: failed ? null : usage(response?.tokenUsage, cost),
    generation_time_ms: Math.max(0, Math.round(result.latencyMs ?? 0)),
    attempts: 1,
    spent_cost: cost,
    config: place.config.canonical,
    config_fingerprint: place.config.fingerprint,
    score: {
      value: failed ? "S" : result.success ? "C" : "I",
      numeric: failed ? null : result.success ? 1 : 0,
      metrics: metrics(result.namedScores),
      answer: failed ? null : answerText(response?.output),
      explanation: result.gradingResult?.reason ?? result.error ?? "",
    },
    error: failed ? { kind: "provider_error", message: firstLine(result.error ?? response?.error ?? "no output") } : null,
    target: target(result),
    input: result.prompt.raw,
    worker: { host: hostname(), pid: process.pid },
    harness: { name: "promptfoo", version: place.harnessVersion },
    harness_payload: new TextEncoder().encode(JSON.stringify(payload(result, response))),
  };
}

/** What a served case answers: the durable record's output and usage, marked cached. */
export function servedResponse(record: DecodedSampleResult): ProviderResponse {
  const stored = storedOutput(record);
  const usage = record.usage;
  return {
    output: stored,
    cached: true,
    cost: 0,
    tokenUsage:
      usage === null
        ? undefined
        : { prompt: Number(usage.input_tokens), completion: Number(usage.output_tokens), total: Number(usage.total_tokens) },
    metadata: { resultlog: { served: true, created_at: Number(record.created_at) } },
  };
}

/** The provider's output as the record stored it (the payload keeps non-text outputs whole). */
export function storedOutput(record: DecodedSampleResult): unknown {
  if (record.harness_payload !== null) {
    try {
      const found = JSON.parse(new TextDecoder().decode(record.harness_payload)) as { output?: unknown };
      if (found.output !== undefined) {
        return found.output;
      }
    } catch {
      // a payload that is not ours: the answer is the output
    }
  }
  return record.score.answer;
}

function usage(tokens: TokenUsage | undefined, cost: number): Usage | null {
  if (tokens === undefined) {
    return null;
  }
  const input = Math.max(0, Math.round(tokens.prompt ?? 0));
  const output = Math.max(0, Math.round(tokens.completion ?? 0));
  return {
    input_tokens: input,
    output_tokens: output,
    total_tokens: Math.max(0, Math.round(tokens.total ?? input + output)),
    reasoning_tokens: Math.max(0, Math.round(tokens.completionDetails?.reasoning ?? 0)),
    total_cost: cost,
  };
}

/** promptfoo's named scores, by name in its order; non-finite values dropped (not Avro). */
function metrics(named: Record<string, number> | undefined): Map<string, number> {
  return new Map(Object.entries(named ?? {}).filter(([, value]) => typeof value === "number" && Number.isFinite(value)));
}

function answerText(output: unknown): string | null {
  if (output === undefined || output === null) {
    return null;
  }
  return typeof output === "string" ? output : JSON.stringify(output);
}

/** The expected value of the case's first assertion that names one as text. */
function target(result: EvaluateResult): string | null {
  const found = (result.testCase.assert ?? []).find((a) => typeof a.value === "string" || typeof a.value === "number");
  return found === undefined ? null : String(found.value);
}

/** The case as promptfoo saw it: the test (vars, assertions), the grading, the raw output. */
function payload(result: EvaluateResult, response: ProviderResponse | undefined): Record<string, unknown> {
  return {
    test: {
      description: result.testCase.description ?? null,
      vars: result.testCase.vars ?? result.vars ?? {},
      assert: result.testCase.assert ?? [],
    },
    prompt: { label: result.prompt.label },
    provider: result.provider,
    success: result.success,
    score: result.score,
    named_scores: result.namedScores ?? {},
    failure_reason: result.failureReason,
    error: result.error ?? null,
    grading: (result.gradingResult?.componentResults ?? []).map((c) => ({
      type: c.assertion?.type ?? null,
      pass: c.pass,
      score: c.score,
      reason: c.reason ?? null,
    })),
    token_usage: response?.tokenUsage ?? null,
    cost: response?.cost ?? result.cost ?? null,
    output: response?.output ?? null,
  };
}

function firstLine(text: string): string {
  return text.split("\n", 1)[0]!.slice(0, 500);
}
