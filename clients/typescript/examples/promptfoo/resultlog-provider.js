// The resultlog provider: wraps `config.provider` (any promptfoo provider), serves durable
// cases from the log, and names each case in its requests (x_bench).
import { loadApiProvider } from "promptfoo";
import { resultlogProvider } from "../../dist/src/promptfoo/index.js";

export default resultlogProvider(loadApiProvider);
