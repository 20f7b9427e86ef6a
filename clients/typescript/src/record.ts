/** SampleResult as TypeScript sees it: the newest schema's fields, field for field. */
import type { Long } from "./long.js";
import type { AvroMap } from "./orderedMap.js";

export type RecordStatus = "completed" | "degraded";
export type ScoreValue = "C" | "I" | "S";

export interface Usage {
  input_tokens: Long;
  output_tokens: Long;
  total_tokens: Long;
  reasoning_tokens?: Long;
  total_cost?: number;
}

export interface Score {
  value: ScoreValue;
  numeric?: number | null;
  /** A Map keeps its order on the wire (decoding gives one); an object writes Object.keys order. */
  metrics?: AvroMap<number>;
  answer?: string | null;
  explanation?: string;
  trajectory?: string | null;
}

export interface RecordErrorInfo {
  kind: string;
  message: string;
  http_status?: number | null;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export interface Message {
  role: string;
  content?: string | null;
  content_parts?: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string | null;
  reasoning?: string | null;
  model?: string | null;
  reasoning_details?: string | null;
  citations?: string | null;
}

export interface WriterProcess {
  host: string;
  pid: Long;
}

export interface Harness {
  name: string;
  version: string;
}

/** One evaluated (sample, epoch) of a run; optional fields default as the schema says. */
export interface SampleResult {
  format_version: number;
  run_id: string;
  benchmark_id: string;
  model: string;
  sample_index: Long;
  epoch: Long;
  sample_id: string;
  status: RecordStatus;
  /** Milliseconds since the Unix epoch (UTC). */
  created_at: Long;
  epochs: Long;
  dataset_size?: Long | null;
  selected_samples?: Long | null;
  usage?: Usage | null;
  generation_time_ms?: Long | null;
  attempts?: number | null;
  spent_cost?: number | null;
  config_fingerprint?: string | null;
  score: Score;
  error?: RecordErrorInfo | null;
  chunk_id?: string | null;
  chunk_index?: Long | null;
  worker?: WriterProcess | null;
  generation_ids?: string[];
  target?: string | null;
  input: string;
  messages?: Message[];
  response_items?: string | null;
  metadata?: string | null;
  truncated?: string | null;
  config?: string | null;
  harness?: Harness | null;
  harness_payload?: Uint8Array | null;
}

/** A decoded record: every field present, metrics in wire order. */
export type DecodedSampleResult = Required<Omit<SampleResult, "score">> & {
  score: Required<Omit<Score, "metrics">> & { metrics: Map<string, number> };
};
