/**
 * The relay codec's floors on a daemon's own client-terminal settings: a
 * hub's `run.start` may lower them, never raise them — each key, the hub
 * asking more, the same, less, or nothing.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mapRunStart } from "../../lib/relay/payload.ts";

const MAP_OPTIONS = {
  jobId: "job-1",
  fallbackCwd: "/srv/daemon",
  home: "/home/al",
};

function plan(
  config: Record<string, unknown>,
  own: { clientTerminals: boolean; terminalTimeout: number },
) {
  return mapRunStart(
    { input: { text: "hi" }, config: { provider: "codex", ...config } },
    { ...MAP_OPTIONS, terminals: own },
  ).config;
}

Deno.test("a hub's terminal-timeout is capped at the daemon's own: asking more, the same or nothing gets the daemon's; less gets less", () => {
  const own = { clientTerminals: true, terminalTimeout: 30 };
  for (const asked of [31, 600, 15_000]) {
    assert.equal(
      plan({ client_terminals: true, terminal_timeout: asked }, own)
        .terminalTimeout,
      30,
      `asked ${asked}`,
    );
  }
  assert.equal(
    plan({ client_terminals: true, terminal_timeout: 30 }, own)
      .terminalTimeout,
    30,
  );
  assert.equal(
    plan({ client_terminals: true, terminal_timeout: 2 }, own).terminalTimeout,
    2,
  );
  assert.equal(plan({ client_terminals: true }, own).terminalTimeout, 30);
});

Deno.test("a hub turns a daemon's client terminals off, never on", () => {
  for (
    const [asked, mine, expected] of [
      [true, true, true],
      [
        true,
        false,
        false,
      ],
      [false, true, false],
      [false, false, false],
    ]
  ) {
    assert.equal(
      plan({ client_terminals: asked }, {
        clientTerminals: mine,
        terminalTimeout: 30,
      }).clientTerminals,
      expected,
      `hub ${asked}, daemon ${mine}`,
    );
  }
});
