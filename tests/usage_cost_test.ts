/**
 * A run's cost from its agent session's running total (`costSince`): the
 * difference to the total the session's previous run ended with, or the whole
 * figure where the agent started counting again.
 *
 * @module
 */

import assert from "node:assert/strict";
import { costSince } from "../lib/events.ts";

const usd = (amount: number) => ({ amount, currency: "USD" });

Deno.test("a run that continued a session costs what it added to the session's total", () => {
  assert.deepEqual(costSince(usd(0.75), usd(0.5)), usd(0.25));
  // Fractions that drift when subtracted come out as the agent meant them.
  assert.deepEqual(costSince(usd(0.3), usd(0.1)), usd(0.2));
  assert.deepEqual(costSince(usd(0.5), usd(0.5)), usd(0));
});

Deno.test("a new session, another currency or a total below the last counts whole", () => {
  assert.deepEqual(costSince(usd(0.75), undefined), usd(0.75));
  assert.deepEqual(
    costSince({ amount: 0.2, currency: "EUR" }, usd(0.1)),
    { amount: 0.2, currency: "EUR" },
  );
  // The agent counted from zero again (a new process that does not keep it).
  assert.deepEqual(costSince(usd(0.1), usd(0.5)), usd(0.1));
});
