/** The provider wrapper: a durable case is served from the log, any other goes to the wrapped
 * provider with x_bench naming the case, under the run key's lease. */
import { LeaseLostError } from "./lease.js";
import { POSITION, PromptfooError } from "./identity.js";
import { servedResponse } from "./mapping.js";
import { session } from "./session.js";
import type { CallContext, LoadApiProvider, PromptfooProvider, ProviderResponse, TestCase } from "./types.js";

/** The wrapped provider as the config names it: `config.provider` of the resultlog provider. */
export interface WrappedSpec {
  id: string;
  label?: string;
  config?: Record<string, unknown>;
}

/** What promptfoo gives a file:// provider's constructor. */
export interface ProviderOptions {
  id?: string;
  label?: string;
  config?: Record<string, unknown>;
  env?: Record<string, string>;
}

/** The resultlog provider: `id: file://…` with `config: {provider: {id, config}, runId?}`. */
export class ResultLogProvider implements PromptfooProvider {
  readonly wrapped: WrappedSpec;
  readonly runId: unknown;
  readonly config: Record<string, unknown>;
  label?: string;
  private inner: Promise<PromptfooProvider> | undefined;

  constructor(
    options: ProviderOptions,
    private readonly load: LoadApiProvider,
  ) {
    this.config = options.config ?? {};
    this.wrapped = wrappedSpec(this.config["provider"]);
    this.runId = this.config["runId"];
    if (options.label !== undefined) {
      this.label = options.label;
    }
  }

  /** The wrapped provider's id: the run key's model. */
  id(): string {
    return this.wrapped.id;
  }

  async callApi(prompt: string, context?: CallContext, options?: unknown): Promise<ProviderResponse> {
    const eval_ = session();
    const run = eval_.runOf(this);
    const test = context?.test;
    const position = test?.metadata?.[POSITION];
    if (test === undefined || typeof position !== "number" || context?.prompt === undefined) {
      throw new PromptfooError("a case without its test's position: is the resultlog beforeAll hook configured?");
    }
    const repeatIndex = context.repeatIndex ?? 0;
    if (repeatIndex >= eval_.epochs) {
      throw new PromptfooError(`repeat ${repeatIndex + 1} of ${eval_.epochs}: give the repeat count as --repeat on the command line`);
    }
    const { sampleIndex, sampleId } = eval_.place(position, context.prompt.label);
    const seed = run.seed(sampleIndex, repeatIndex);
    if (seed !== undefined) {
      run.served += 1;
      eval_.calls.set(test, { repeatIndex, served: true, refused: false });
      return servedResponse(seed);
    }
    try {
      run.lease.check();
    } catch (error) {
      eval_.calls.set(test, { repeatIndex, served: false, refused: true });
      throw error instanceof LeaseLostError ? error : new PromptfooError(String(error));
    }
    run.called += 1;
    const inner = await this.wrappedProvider();
    const response = await inner.callApi(prompt, stamped(context, inner, sampleId, repeatIndex), options);
    eval_.calls.set(test, { repeatIndex, response, served: false, refused: false });
    return response;
  }

  private wrappedProvider(): Promise<PromptfooProvider> {
    const basePath = this.config["basePath"];
    const options: Record<string, unknown> = { id: this.wrapped.id, config: this.wrapped.config ?? {} };
    if (this.wrapped.label !== undefined) {
      options["label"] = this.wrapped.label;
    }
    this.inner ??= this.load(this.wrapped.id, { options, ...(typeof basePath === "string" ? { basePath } : {}) });
    return this.inner;
  }
}

/** The context with x_bench = (sample id, repeat) in the request body (the OpenAI family's
 * `passthrough`), as the Python model client stamps it. */
function stamped(context: CallContext, inner: PromptfooProvider, sampleId: string, epoch: number): CallContext {
  const prompt = context.prompt!;
  const passthrough = {
    ...((inner.config?.["passthrough"] as Record<string, unknown> | undefined) ?? {}),
    ...((prompt.config?.["passthrough"] as Record<string, unknown> | undefined) ?? {}),
    x_bench: { sample_id: sampleId, sample_epoch: epoch },
  };
  return { ...context, prompt: { ...prompt, config: { ...(prompt.config ?? {}), passthrough } } };
}

function wrappedSpec(value: unknown): WrappedSpec {
  if (typeof value !== "object" || value === null || typeof (value as { id?: unknown }).id !== "string") {
    throw new PromptfooError("the resultlog provider needs `config.provider` with the `id` of the provider it wraps");
  }
  const spec = value as WrappedSpec;
  const unset = /\{\{\s*env\.(\w+)/.exec(JSON.stringify(spec));
  if (unset !== null) {
    throw new PromptfooError(`the wrapped provider's settings use ${unset[1]}, which is not set`);
  }
  return spec;
}

/** True for a provider this integration wraps. */
export function isResultLogProvider(provider: unknown): provider is ResultLogProvider {
  return provider instanceof ResultLogProvider;
}

export type { TestCase };
