/** promptfoo's extension hooks: beforeAll leases each wrapped provider's run key and loads its
 * durable cases (refusing a changed config before any call), afterEach makes each finished
 * case durable before promptfoo goes on, afterAll writes degraded cases and lets go. */
import { bootstrapServers } from "../localStack.js";
import type { DecodedSampleResult } from "../record.js";
import { KafkaResultStore, pairKey } from "../store.js";
import {
  benchmarkName,
  POSITION,
  PromptfooError,
  repeatCount,
  runConfig,
  runIdOf,
  runKeyOf,
} from "./identity.js";
import { LeaseClient } from "./lease.js";
import { sampleResult } from "./mapping.js";
import { isResultLogProvider, type ResultLogProvider } from "./provider.js";
import { promptfooVersion, ProviderRun, session, Session, setSession } from "./session.js";
import type { EvaluateResult, TestCase, TestSuite } from "./types.js";

/** Set up the eval's runs; returns the suite with each test's position in its metadata. */
export async function beforeAll(context: { suite: TestSuite }): Promise<{ suite: TestSuite }> {
  const suite = context.suite;
  const tests = checkedTests(suite);
  const wrapped = suite.providers.filter(isResultLogProvider);
  if (wrapped.length === 0) {
    throw new PromptfooError("no provider is a resultlog provider: wrap one (id: file://…resultlog provider)");
  }
  const labels = suite.prompts.map((p) => p.label);
  if (new Set(labels).size !== labels.length) {
    throw new PromptfooError("two prompts share a label: give each prompt its own label");
  }
  const brokers = bootstrapServers();
  const clientId = process.env["RESULTLOG_CLIENT_ID"] ?? "resultlog";
  const store = await KafkaResultStore.connect({ settings: { bootstrapServers: brokers } });
  const leases = await LeaseClient.connect(brokers, clientId).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const eval_ = new Session(store, leases, repeatCount(), tests.length, labels, promptfooVersion());
  try {
    await openRuns(eval_, suite, wrapped, tests);
  } catch (error) {
    await closeSession(eval_);
    throw error;
  }
  tests.forEach((test, position) => {
    test.metadata = { ...(test.metadata ?? {}), [POSITION]: position };
  });
  setSession(eval_);
  return { suite };
}

/** Make the finished case durable (acknowledged by the broker) before promptfoo goes on. */
export async function afterEach(context: { test: TestCase; result: EvaluateResult }): Promise<void> {
  const eval_ = session();
  const { test, result } = context;
  const provider = [...eval_.runs.keys()].find((p) => sameProvider(p as ResultLogProvider, result));
  if (provider === undefined) {
    return; // a provider this integration does not wrap: not on the log
  }
  const call = eval_.calls.get(test);
  if (call?.served || call?.refused) {
    return; // durable already, or never asked under our lease
  }
  const run = eval_.runOf(provider);
  const position = test.metadata?.[POSITION] ?? result.testCase.metadata?.[POSITION];
  if (typeof position !== "number") {
    throw new PromptfooError(`case ${result.testIdx} has no test position: was the suite changed after beforeAll?`);
  }
  const epoch = call?.repeatIndex ?? result.testIdx - position * eval_.epochs;
  const { sampleIndex, sampleId } = eval_.place(position, result.prompt.label);
  const record = sampleResult(
    result,
    {
      runKey: run.runKey,
      config: run.config,
      sampleIndex,
      sampleId,
      epoch,
      epochs: eval_.epochs,
      datasetSize: eval_.datasetSize,
      harnessVersion: eval_.harnessVersion,
    },
    call?.response,
  );
  if (record.status === "degraded") {
    run.degraded.push(record); // written once every case has settled, never over a durable one
    return;
  }
  await eval_.store.write(record);
  run.written += 1;
}

/** Write the degraded cases, release the leases, disconnect; one summary line per run. */
export async function afterAll(): Promise<void> {
  const eval_ = session();
  setSession(null);
  try {
    for (const run of eval_.runs.values()) {
      const degraded = await eval_.store.writeDegraded(run.runKey, run.degraded);
      const { runId, benchmarkId, model } = run.runKey;
      process.stderr.write(
        `resultlog: ${runId} / ${benchmarkId} / ${model}: ${run.written} case(s) written, ` +
          `${run.served} served from the log, ${degraded.written.length} degraded\n`,
      );
    }
  } finally {
    await closeSession(eval_);
  }
}

async function openRuns(eval_: Session, suite: TestSuite, wrapped: ResultLogProvider[], tests: TestCase[]): Promise<void> {
  const benchmark = benchmarkName(suite.description);
  const keys = new Set<string>();
  for (const provider of wrapped) {
    const runKey = runKeyOf(runIdOf(process.env, provider.runId), benchmark, provider.id());
    const key = JSON.stringify(runKey);
    if (keys.has(key)) {
      throw new PromptfooError(`two providers write run key ${runKey.runId} / ${benchmark} / ${runKey.model}: give each its own id`);
    }
    keys.add(key);
    const { basePath: _where, ...settings } = provider.wrapped.config ?? {};
    const config = runConfig({
      description: benchmark,
      providerId: provider.id(),
      providerConfig: settings,
      prompts: suite.prompts,
      tests,
      defaultTest: suite.defaultTest,
    });
    const lease = await eval_.leases.claim(runKey, [0, eval_.datasetSize]);
    let seeds: Map<string, DecodedSampleResult>;
    try {
      const state = await eval_.store.load(runKey, { epochs: eval_.epochs, configFingerprint: config.fingerprint });
      seeds = new Map(state.seeds.map((r) => [pairKey(r.sample_index, r.epoch), r]));
    } catch (error) {
      await lease.release();
      throw error;
    }
    eval_.runs.set(provider, new ProviderRun(runKey, config, lease, seeds));
  }
}

async function closeSession(eval_: Session): Promise<void> {
  for (const run of eval_.runs.values()) {
    await run.lease.release();
  }
  await eval_.leases.close().catch(() => undefined);
  await eval_.store.close();
}

/** The suite's tests, refused when promptfoo would expand them into cases we cannot place. */
function checkedTests(suite: TestSuite): TestCase[] {
  if ((suite.scenarios ?? []).length > 0) {
    throw new PromptfooError("scenarios are not supported on the log: list the cases under `tests`");
  }
  const tests = suite.tests ?? [];
  if (tests.length === 0) {
    throw new PromptfooError("the config has no tests: nothing to put on the log");
  }
  const expands = !process.env["PROMPTFOO_DISABLE_VAR_EXPANSION"];
  tests.forEach((test, i) => {
    const list = Object.entries(test.vars ?? {}).find(([, value]) => Array.isArray(value));
    if (expands && list !== undefined && !test.options?.["disableVarExpansion"]) {
      throw new PromptfooError(
        `test ${i + 1}: var ${list[0]} is a list, which promptfoo expands into several cases; ` +
          "set options.disableVarExpansion or give each case its own test",
      );
    }
  });
  return tests;
}

function sameProvider(provider: ResultLogProvider, result: EvaluateResult): boolean {
  return (provider.label || provider.id()) === (result.provider.label || result.provider.id);
}
