/** AckedOffsets: a partition's acknowledged offsets never run backwards in one topic. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { AckedOffsets } from "../src/ackedOffsets.js";
import { TopicRecreatedError, WritePolicy } from "../src/index.js";

test("offsets that rise, or repeat, on each partition are the same topic", () => {
  const acked = new AckedOffsets("results");
  for (const [partition, offset] of [[0, 0n], [1, 5n], [0, 1n], [0, 1n], [1, 9n]] as const) {
    acked.note(partition, offset);
  }
  acked.check();
});

test("an offset below one acknowledged before names the re-created topic, then every write stops", () => {
  const acked = new AckedOffsets("results");
  acked.note(3, 41n);
  acked.note(2, 7n);
  const recreated = (error: unknown) =>
    error instanceof TopicRecreatedError &&
    !error.retriable &&
    /^results topic results was deleted and re-created .*partition 3 acknowledged offset 0 after 41.*run again/.test(error.message) &&
    !error.message.includes("\n");
  assert.throws(() => acked.note(3, 0n), recreated);
  assert.throws(() => acked.check(), recreated);
  assert.throws(() => acked.note(2, 8n), recreated);
});

test("the write policy passes a re-created topic through at once, unwrapped", async () => {
  let calls = 0;
  const policy = new WritePolicy({ initialDelayMs: 1 });
  const failing = async () => {
    calls += 1;
    throw new TopicRecreatedError("results topic results was deleted and re-created");
  };
  await assert.rejects(policy.retry("persist sample s epoch 0", failing), (error: unknown) => {
    return error instanceof TopicRecreatedError && error.message === "results topic results was deleted and re-created";
  });
  assert.equal(calls, 1);
});
