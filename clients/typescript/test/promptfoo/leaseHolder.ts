/** Hold a lease on a run key for the interop tests: `node leaseHolder.js RUN BENCHMARK MODEL`
 * prints "held" and keeps it until killed; exits 3 naming the holder when another has it. */
import { bootstrapServers } from "../../src/localStack.js";
import { LeaseClient, LeaseHeldError } from "../../src/promptfoo/index.js";

const [runId, benchmarkId, model] = process.argv.slice(2) as [string, string, string];
const client = await LeaseClient.connect(bootstrapServers(), "resultlog-lease-test");
try {
  await client.claim({ runId, benchmarkId, model }, [0, 24]);
  console.log("held");
  setInterval(() => undefined, 60_000); // until killed
} catch (error) {
  await client.close();
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = error instanceof LeaseHeldError ? 3 : 1;
}
