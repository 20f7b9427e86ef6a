/** Request context: the (sample_id, epoch) whose model call is running, stamped as x_bench. */
import { AsyncLocalStorage } from "node:async_hooks";

/** The identity of one (sample, epoch) evaluation, and the model calls it made. */
export class SampleContext {
  readonly generationIds: string[] = [];
  /** The cost of every model attempt the sample made (0 for a failed one), in call order. */
  readonly attemptCosts: number[] = [];

  constructor(
    readonly sampleId: string,
    readonly epoch: number,
  ) {}

  /** Count one model attempt and what the endpoint said it cost. */
  addAttempt(cost: number): void {
    this.attemptCosts.push(cost);
  }

  /** Remember a model call's generation id (once, in call order). */
  addGenerationId(generationId: string): void {
    if (!this.generationIds.includes(generationId)) {
      this.generationIds.push(generationId);
    }
  }
}

// Every async continuation started inside a scope sees that scope's sample, and only it:
// concurrent samples need no locking.
const current = new AsyncLocalStorage<SampleContext>();

/** Run `fn` with (sampleId, epoch) as the current sample; the previous one is back after. */
export function sampleScope<T>(sampleId: string, epoch: number, fn: (context: SampleContext) => T): T {
  if (typeof sampleId !== "string" || sampleId.length === 0) {
    throw new RangeError(`sampleId must be a non-empty string, got ${JSON.stringify(sampleId)}`);
  }
  if (!Number.isSafeInteger(epoch) || epoch < 0) {
    throw new RangeError(`epoch must be an integer >= 0, got ${String(epoch)}`);
  }
  const context = new SampleContext(sampleId, epoch);
  return current.run(context, () => fn(context));
}

/** The sample whose scope encloses the caller, or undefined outside any scope. */
export function currentSample(): SampleContext | undefined {
  return current.getStore();
}

/** A chat-completions body with `x_bench` = the current sample (replacing any `x_bench` the
 * caller set), as the Python model client stamps it; outside a scope, the body as given. */
export function stampXBench<T extends Record<string, unknown>>(body: T): T & { x_bench?: XBench } {
  const context = current.getStore();
  if (context === undefined) {
    return body;
  }
  return { ...body, x_bench: { sample_id: context.sampleId, sample_epoch: context.epoch } };
}

/** What x_bench carries: a budget gateway keys request coalescing on it. */
export interface XBench {
  sample_id: string;
  sample_epoch: number;
}
