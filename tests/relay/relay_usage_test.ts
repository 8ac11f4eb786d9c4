/**
 * Usage on the relay wire: the token counters in LangBot's `usage`, the
 * context window and cost in the runner's details, and back whole.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../../lib/events.ts";
import { fromRelayEvent, toRelayEvent } from "../../lib/relay/wire_events.ts";
import { assertLangBotEvent, assertRelayFrame } from "../contracts.ts";
import { fixtureTurnTokens, fixtureTurnUsage } from "../usage_helpers.ts";

const usage = fixtureTurnUsage();

const completed = (extra: Partial<RunEvent> = {}): RunEvent => ({
  run_id: "r",
  type: "run.completed",
  data: { finish_reason: "end_turn" },
  sequence: 3,
  timestamp: 1_700_000_000_123,
  ...extra,
});

Deno.test("the wire's usage holds LangBot's counters; the window and cost ride in the runner's details and come back", () => {
  const { event, runner } = toRelayEvent(completed({ usage }));
  assertLangBotEvent(event);
  assertRelayFrame(
    { type: "run.event", job_id: "j", event, runner },
    "daemon->hub",
  );
  assert.deepEqual(event.usage, fixtureTurnTokens());
  assert.deepEqual(runner?.usage, {
    used: 1000,
    size: 200000,
    cost: { amount: 0.25, currency: "USD" },
  });
  assert.deepEqual(fromRelayEvent(event, runner).usage, usage);
});

Deno.test("no usage reported: none on the wire and none back; a window alone stays off LangBot's usage", () => {
  const bare = toRelayEvent(completed());
  assert.equal("usage" in bare.event, false);
  assert.equal("usage" in fromRelayEvent(bare.event, bare.runner), false);

  const window = toRelayEvent(
    completed({ usage: { used: 5, size: 10, cost: usage.cost } }),
  );
  assert.equal("usage" in window.event, false);
  assertLangBotEvent(window.event);
  assert.deepEqual(fromRelayEvent(window.event, window.runner).usage, {
    used: 5,
    size: 10,
    cost: usage.cost,
  });
});

Deno.test("an older daemon's usage (window and cost in the event's usage) still reads", () => {
  const old = completed({
    usage: { used: 7, size: 9, cost: { amount: 0.5, currency: "EUR" } },
    timestamp: 1_700_000_000,
  });
  assert.deepEqual(fromRelayEvent(old).usage, {
    used: 7,
    size: 9,
    cost: { amount: 0.5, currency: "EUR" },
  });
});

Deno.test("LangBot's usage takes counters only: a cost object or a fraction there breaks the contract", () => {
  for (const bad of [{ cost: usage.cost }, { prompt_tokens: 1.5 }]) {
    assert.throws(
      () => assertLangBotEvent({ ...completed(), usage: bad, timestamp: 1 }),
      /breaks its contract/,
    );
  }
});
