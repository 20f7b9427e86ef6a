/** sampleScope and stampXBench: each concurrent sample sees only its own identity. */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { test } from "node:test";
import { currentSample, sampleScope, stampXBench } from "../src/index.js";

test("x_bench names the sample and epoch whose scope encloses the call", async () => {
  const bodies = await Promise.all(
    [0, 1, 2].map((epoch) =>
      sampleScope("s-7", epoch, async () => {
        await sleep(5 * (3 - epoch)); // finish in reverse order: no scope leaks into another
        return stampXBench({ model: "m", x_bench: { sample_id: "stale", sample_epoch: 9 } });
      }),
    ),
  );
  assert.deepEqual(
    bodies.map((body) => body.x_bench),
    [0, 1, 2].map((epoch) => ({ sample_id: "s-7", sample_epoch: epoch })),
  );
});

test("outside a scope the body is sent as given and there is no current sample", () => {
  const body = { model: "m", messages: [] };
  assert.equal(stampXBench(body), body);
  assert.equal(currentSample(), undefined);
  sampleScope("a", 0, () => assert.equal(currentSample()?.sampleId, "a"));
  assert.equal(currentSample(), undefined);
});

test("a scope keeps the sample's generation ids once each, in call order", () => {
  const context = sampleScope("a", 1, (ctx) => {
    ctx.addGenerationId("g1");
    ctx.addGenerationId("g2");
    ctx.addGenerationId("g1");
    ctx.addAttempt(0.5);
    return ctx;
  });
  assert.deepEqual([context.generationIds, context.attemptCosts], [["g1", "g2"], [0.5]]);
});

test("a scope refuses an empty sample id or a negative epoch", () => {
  assert.throws(() => sampleScope("", 0, () => 1), /sampleId must be a non-empty string/);
  assert.throws(() => sampleScope("a", -1, () => 1), /epoch must be an integer >= 0/);
});
