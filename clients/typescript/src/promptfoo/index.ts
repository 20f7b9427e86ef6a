/** resultlog for promptfoo: every finished case of `promptfoo eval` durable on the log, and a
 * rerun that serves the durable cases from it. `resultlogProvider(loadApiProvider)` is the
 * provider class to export from a file:// provider; the hooks go in `extensions`. */
import { ResultLogProvider, type ProviderOptions } from "./provider.js";
import type { LoadApiProvider } from "./types.js";

/** The provider class for a file:// provider module, loading wrapped providers with
 * promptfoo's own `loadApiProvider` (imported from "promptfoo" beside the config). */
export function resultlogProvider(loadApiProvider: LoadApiProvider): new (options: ProviderOptions) => ResultLogProvider {
  return class extends ResultLogProvider {
    constructor(options: ProviderOptions) {
      super(options, loadApiProvider);
    }
  };
}

export { afterAll, afterEach, beforeAll } from "./hooks.js";
export { canonicalJson, sha256Hex } from "./canonical.js";
export { benchmarkName, PromptfooError, redacted, repeatCount, runConfig, type ConfigParts, type RunConfig } from "./identity.js";
export { LeaseClient, LeaseError, LeaseHeldError, LeaseLostError, parseLease, RunLease, type LeaseValue } from "./lease.js";
export { sampleResult, servedResponse, storedOutput, type CasePlace } from "./mapping.js";
export { ResultLogProvider, type ProviderOptions, type WrappedSpec } from "./provider.js";
export type * from "./types.js";
export { FAILURE_ERROR } from "./types.js";
