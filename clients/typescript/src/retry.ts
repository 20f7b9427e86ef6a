/** The bounded write policy: 4 attempts, exponential backoff from 200 ms with jitter. */
import { setTimeout as sleep } from "node:timers/promises";
import { PersistenceError, TopicRecreatedError } from "./errors.js";

export interface WritePolicyOptions {
  attempts?: number;
  initialDelayMs?: number;
  /** Uniform in [0, 1): the jitter's source (Math.random by default). */
  random?: () => number;
  /** Told of each failed attempt that will be retried. */
  onRetry?: (what: string, error: unknown, delayMs: number) => void;
}

/** How often and how patiently a write is retried before the run fails. */
export class WritePolicy {
  readonly attempts: number;
  readonly initialDelayMs: number;
  private readonly random: () => number;
  private readonly onRetry: WritePolicyOptions["onRetry"];

  constructor(options: WritePolicyOptions = {}) {
    this.attempts = options.attempts ?? 4;
    this.initialDelayMs = options.initialDelayMs ?? 200;
    this.random = options.random ?? Math.random;
    this.onRetry = options.onRetry;
    if (!Number.isInteger(this.attempts) || this.attempts < 1) {
      throw new RangeError(`attempts must be an integer >= 1, got ${this.attempts}`);
    }
  }

  /** Backoff before retry number `attempt` (1-based), jittered by +-50%. */
  delayMs(attempt: number): number {
    return this.initialDelayMs * 2 ** (attempt - 1) * (0.5 + this.random());
  }

  /** Run `action`, retrying failures; PersistenceError saying it could not `what` at the end. */
  async retry<T>(what: string, action: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await action();
      } catch (error) {
        if (error instanceof TopicRecreatedError) {
          throw error; // its own line says what happened and what to do
        }
        const retriable = !(error instanceof PersistenceError) || error.retriable;
        if (!retriable || attempt >= this.attempts) {
          const reason = error instanceof Error ? error.message : String(error);
          throw new PersistenceError(`could not ${what} after ${attempt} attempt(s): ${reason}`, {
            cause: error,
            retriable: false,
          });
        }
        const delay = this.delayMs(attempt);
        this.onRetry?.(what, error, delay);
        await sleep(delay);
      }
    }
  }
}
