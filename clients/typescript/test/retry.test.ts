/** WritePolicy: 4 attempts, backoff doubling from 200 ms with +-50% jitter, then the run fails. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { PersistenceError, WritePolicy } from "../src/index.js";

test("the backoff doubles from the initial delay, jittered within +-50%", () => {
  const low = new WritePolicy({ random: () => 0 });
  const high = new WritePolicy({ random: () => 0.999999 });
  assert.deepEqual([1, 2, 3].map((n) => low.delayMs(n)), [100, 200, 400]);
  assert.deepEqual([1, 2, 3].map((n) => Math.round(high.delayMs(n))), [300, 600, 1200]);
});

test("a failing write is tried 4 times, then fails the run naming what and why", async () => {
  const delays: number[] = [];
  const policy = new WritePolicy({ initialDelayMs: 1, onRetry: (_what, _error, delay) => delays.push(delay) });
  let calls = 0;
  const failing = async () => {
    calls += 1;
    throw new Error("broker unreachable");
  };
  await assert.rejects(policy.retry("persist sample a epoch 0", failing), (error: unknown) => {
    assert.ok(error instanceof PersistenceError && !error.retriable);
    assert.equal(error.message, "could not persist sample a epoch 0 after 4 attempt(s): broker unreachable");
    return true;
  });
  assert.equal(calls, 4);
  assert.equal(delays.length, 3);
});

test("a write that recovers returns its value; a non-retriable failure is not retried", async () => {
  const policy = new WritePolicy({ initialDelayMs: 1 });
  let calls = 0;
  const flaky = async () => {
    calls += 1;
    if (calls < 3) {
      throw new Error("leader moved");
    }
    return "durable";
  };
  assert.equal(await policy.retry("persist", flaky), "durable");
  assert.equal(calls, 3);
  let denied = 0;
  const refuse = async () => {
    denied += 1;
    throw new PersistenceError("TOPIC_AUTHORIZATION_FAILED", { retriable: false });
  };
  await assert.rejects(policy.retry("persist", refuse), /after 1 attempt\(s\): TOPIC_AUTHORIZATION_FAILED/);
  assert.equal(denied, 1);
});
