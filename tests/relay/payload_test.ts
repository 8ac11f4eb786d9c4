/**
 * The relay codec's floors on a daemon's own settings: a hub's `run.start`
 * may lower its client terminals and sandbox, never raise them — each key,
 * the hub asking more, the same, less, or nothing — and only the daemon
 * names sandbox paths.
 *
 * @module
 */

import assert from "node:assert/strict";
import { mapRunStart } from "../../lib/relay/payload.ts";
import { RunnerError } from "../../lib/errors.ts";

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

/** The daemon's own sandbox settings, with paths of its own. */
function ownSandbox(
  sandbox: "off" | "confined",
  sandboxNetwork: "none" | "full" | "host",
) {
  return {
    sandbox,
    sandboxNetwork,
    sandboxReadPaths: ["/opt/tools"],
    sandboxWritePaths: ["/srv/cache"],
  };
}

function sandboxed(
  config: Record<string, unknown>,
  own?: ReturnType<typeof ownSandbox>,
) {
  return mapRunStart(
    {
      input: { text: "hi" },
      config: { provider: "codex", langbot_assets_enabled: false, ...config },
    },
    { ...MAP_OPTIONS, ...(own ? { sandbox: own } : {}) },
  ).config;
}

Deno.test("a daemon's own sandbox=confined holds whatever the hub asks: off, confined or nothing", () => {
  for (const asked of [{ sandbox: "off" }, { sandbox: "confined" }, {}]) {
    assert.equal(
      sandboxed(asked, ownSandbox("confined", "host")).sandbox,
      "confined",
      JSON.stringify(asked),
    );
  }
});

Deno.test("a daemon that does not require the sandbox takes the hub's: confined stays confined, off or nothing is off", () => {
  for (const own of [ownSandbox("off", "none"), undefined]) {
    assert.equal(sandboxed({ sandbox: "confined" }, own).sandbox, "confined");
    assert.equal(sandboxed({ sandbox: "off" }, own).sandbox, "off");
    assert.equal(sandboxed({}, own).sandbox, "off");
  }
});

Deno.test("a confined daemon's network is a ceiling: the hub may ask less or the same, never more (none < full < host)", () => {
  const cases: [string, string | undefined, string][] = [
    // [daemon's own, hub asks (undefined: nothing), the job gets]
    ["none", "none", "none"],
    ["none", "full", "none"],
    ["none", "host", "none"],
    ["none", undefined, "none"],
    ["full", "none", "none"],
    ["full", "full", "full"],
    ["full", "host", "full"],
    ["full", undefined, "full"],
    ["host", "none", "none"],
    ["host", "full", "full"],
    ["host", "host", "host"],
    ["host", undefined, "full"],
  ];
  for (const [mine, asked, expected] of cases) {
    const config = sandboxed(
      asked === undefined ? {} : { sandbox_network: asked },
      ownSandbox("confined", mine as "none" | "full" | "host"),
    );
    assert.equal(
      config.sandboxNetwork,
      expected,
      `daemon ${mine}, hub ${asked}`,
    );
  }
});

Deno.test("a daemon that does not require the sandbox takes the hub's network as asked", () => {
  for (const asked of ["none", "full", "host"]) {
    assert.equal(
      sandboxed(
        { sandbox: "confined", sandbox_network: asked },
        ownSandbox("off", "none"),
      ).sandboxNetwork,
      asked,
    );
  }
});

Deno.test("a network no daemon knows is refused with config.invalid, not taken as the daemon's", () => {
  assert.throws(
    () =>
      sandboxed(
        { sandbox_network: "everything" },
        ownSandbox("confined", "none"),
      ),
    (error: unknown) =>
      error instanceof RunnerError && error.code === "config.invalid",
  );
});

Deno.test("sandbox paths come from the daemon alone: the hub's are ignored, with or without the daemon's own", () => {
  const hubPaths = {
    sandbox: "confined",
    sandbox_read_paths: ["/"],
    sandbox_write_paths: ["/home/al/.ssh"],
    "sandbox-write-paths": "/etc",
  };
  const mine = mapRunStart(
    {
      input: { text: "hi" },
      config: { provider: "codex", langbot_assets_enabled: false, ...hubPaths },
    },
    { ...MAP_OPTIONS, sandbox: ownSandbox("confined", "full") },
  );
  assert.deepEqual(mine.config.sandboxReadPaths, ["/opt/tools"]);
  assert.deepEqual(mine.config.sandboxWritePaths, ["/srv/cache"]);
  assert.deepEqual(mine.ignoredKeys, [
    "sandbox_read_paths",
    "sandbox_write_paths",
    "sandbox-write-paths",
  ]);
  const none = sandboxed(hubPaths);
  assert.deepEqual(none.sandboxReadPaths, []);
  assert.deepEqual(none.sandboxWritePaths, []);
});
