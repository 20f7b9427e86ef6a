/** The parts of promptfoo 0.120's objects this integration reads (its own types are not a
 * dependency of this package: promptfoo is installed beside the config that uses it). */

/** A provider as promptfoo holds it. */
export interface PromptfooProvider {
  id(): string;
  label?: string;
  config?: Record<string, unknown>;
  callApi(prompt: string, context?: CallContext, options?: unknown): Promise<ProviderResponse>;
}

/** What promptfoo's loadApiProvider(path, {options, basePath, env}) returns. */
export type LoadApiProvider = (
  id: string,
  context: { options?: Record<string, unknown>; basePath?: string; env?: Record<string, string> },
) => Promise<PromptfooProvider>;

export interface TokenUsage {
  prompt?: number;
  completion?: number;
  total?: number;
  completionDetails?: { reasoning?: number };
}

export interface ProviderResponse {
  output?: unknown;
  error?: string;
  tokenUsage?: TokenUsage;
  cost?: number;
  cached?: boolean;
  latencyMs?: number;
  metadata?: Record<string, unknown>;
}

export interface Assertion {
  type: string;
  value?: unknown;
  metric?: string;
  weight?: number;
  [key: string]: unknown;
}

export interface TestCase {
  description?: string;
  vars?: Record<string, unknown>;
  assert?: Assertion[];
  options?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  threshold?: number;
  [key: string]: unknown;
}

export interface Prompt {
  raw: string;
  label: string;
  id?: string;
  config?: Record<string, unknown>;
}

/** What a provider's callApi is given about the case it answers. */
export interface CallContext {
  vars?: Record<string, unknown>;
  prompt?: Prompt;
  test?: TestCase;
  repeatIndex?: number;
  [key: string]: unknown;
}

export interface ComponentResult {
  pass: boolean;
  score: number;
  reason?: string;
  assertion?: Assertion | null;
}

export interface GradingResult {
  pass: boolean;
  score: number;
  reason?: string;
  namedScores?: Record<string, number>;
  componentResults?: ComponentResult[];
}

/** One finished case (test, prompt, provider, repeat): promptfoo's EvaluateResult. */
export interface EvaluateResult {
  provider: { id: string; label?: string };
  prompt: { raw: string; label: string };
  vars: Record<string, unknown>;
  response?: ProviderResponse;
  error?: string | null;
  success: boolean;
  failureReason: number;
  score: number;
  namedScores: Record<string, number>;
  latencyMs: number;
  cost?: number;
  gradingResult?: GradingResult | null;
  promptIdx: number;
  testIdx: number;
  testCase: TestCase;
  tokenUsage?: TokenUsage;
}

/** promptfoo's ResultFailureReason.ERROR: the case has no graded output (provider failed). */
export const FAILURE_ERROR = 2;

/** The test suite as the beforeAll hook sees it. */
export interface TestSuite {
  description?: string;
  providers: PromptfooProvider[];
  prompts: Prompt[];
  tests?: TestCase[];
  scenarios?: unknown[];
  defaultTest?: unknown;
}
