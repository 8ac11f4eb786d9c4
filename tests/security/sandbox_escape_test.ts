/**
 * Attacks on the sandbox itself (`docs/sandbox.md`, "Nothing to escape
 * with"): a confined agent that misbehaves on purpose (`--attack-escape`,
 * `tests/fixtures/attack_escape.ts`) looks for capabilities and tries the
 * calls container escapes are made of — `umount` of the masked files, a
 * read-write remount of a read-only bind, `open_by_handle_at` on a host file,
 * the host's keyrings, a nested user namespace — itself and through a client
 * terminal, under a root runner (this suite runs as root) and under an
 * unprivileged one, through every entrance: a run of the engine (what
 * `runner run` runs), `runner run` itself as `nobody`, a caller's run on
 * `runner serve --sandbox confined` (as root and as `nobody`) and a hub's job
 * on `runner daemon --sandbox confined`. Everything fails, and the host files
 * stay unread and untouched. With `sandbox-network none` (no network helper
 * whose own user namespace would hide a missing one) a root runner's agent is
 * still in a user namespace of its own. Needs bwrap and python3; fails (never skips)
 * without them.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { DENO_RUN_FLAGS } from "../../lib/runtime_permissions.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { harness, runCompleted } from "../engine_helpers.ts";
import { parseJsonLines, ROOT, tempDir } from "../helpers.ts";
import {
  DENO_DIR,
  sandboxKeys,
  type SandboxWorld,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import {
  attackDaemon,
  attackerCommand,
  attackLines,
  attackServe,
  callerRun,
  replyOf,
} from "./entrances.ts";
import {
  assertEscapeFailed,
  escapeAttack,
  escapeFlags,
  escapeTerminal,
  terminalAttackLines,
} from "./escape_checks.ts";
import { AS_NOBODY, nobodysDir, nobodyTest } from "./nobody.ts";

/** A confined fixture run in `world` whose flags may hold spaces and JSON. */
function attackConfig(
  world: SandboxWorld,
  flags: string[],
  extra: Record<string, unknown>,
) {
  return parseRunConfig({
    ...sandboxKeys(world, [], extra),
    "acp-command": attackerCommand(...flags),
  });
}

/**
 * Runs the attacker agent with `flags` (made from the attack's spec) in a
 * confined run of the engine, and fails unless every escape call in the
 * report `lines` reads from its reply failed.
 */
async function engineAttack(
  attack: {
    flags: (spec: ReturnType<typeof escapeAttack>) => string[];
    extra?: Record<string, unknown>;
    lines: (message: string) => Record<string, string>;
  },
): Promise<void> {
  const world = sandboxWorld();
  const spec = escapeAttack(world.homeSecret);
  const h = harness({ environment: world.environment });
  try {
    const config = attackConfig(world, attack.flags(spec), {
      "sandbox-read-paths": [ROOT, DENO_DIR, spec.readOnlyDir],
      "langbot-assets-enabled": false,
      ...attack.extra,
    });
    const log = await runCompleted(h.manager, {
      input: { text: "hi" },
      config,
    });
    assertEscapeFailed(
      attack.lines(log.messages()[0]),
      spec,
      world.homeSecret,
    );
  } finally {
    await h.close();
  }
}

Deno.test("a root runner's confined agent finds no capability, and umount, remount, open_by_handle_at, the keyrings and a nested user namespace all fail", async () => {
  assert.equal(Deno.uid(), 0, "this attack is on a runner started as root");
  await engineAttack({
    flags: (spec) => ["--attack-escape", JSON.stringify(spec)],
    lines: attackLines,
  });
});

Deno.test("a root runner's confined agent with sandbox-network none (no network helper's namespace around it) is in a user namespace of its own, and every escape call fails", async () => {
  assert.equal(Deno.uid(), 0, "this attack is on a runner started as root");
  await engineAttack({
    flags: (spec) => ["--attack-escape", JSON.stringify(spec)],
    extra: { "sandbox-network": "none" },
    lines: attackLines,
  });
});

Deno.test("a confined agent's terminal command gets the same: no capability, and every escape call fails", async () => {
  await engineAttack({
    flags: (spec) => ["--terminal", JSON.stringify(escapeTerminal(spec))],
    extra: { "client-terminals": true },
    lines: terminalAttackLines,
  });
});

// Starting the runner as another user needs root (setpriv).
nobodyTest(
  "an unprivileged runner's confined agent (runner started as nobody) finds the same: no capability, no nested user namespace, every escape call fails",
  async (nobody) => {
    const spec = escapeAttack(
      nobody.homeSecret,
      nobodysDir("nobody-read-only-"),
    );
    const [setpriv, ...asNobody] = AS_NOBODY;
    const output = await new Deno.Command(setpriv, {
      args: [
        ...asNobody,
        Deno.execPath(),
        "run",
        ...DENO_RUN_FLAGS,
        "--node-modules-dir=manual",
        `${ROOT}main.ts`,
        "run",
        "custom",
        "--acp-command",
        attackerCommand("--attack-escape", JSON.stringify(spec)),
        "--workspace",
        nobodysDir("nobody-ws-"),
        "--sandbox",
        "confined",
        "--sandbox-read-paths",
        `${ROOT},${nobody.denoDir},${spec.readOnlyDir}`,
        "--langbot-assets-enabled",
        "false",
        "--json",
        "hi",
      ],
      clearEnv: true,
      env: nobody.environment,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(output.stderr);
    const stdout = new TextDecoder().decode(output.stdout);
    assert.equal(output.code, 0, stderr + stdout.slice(-2000));
    const events = parseJsonLines(stdout) as unknown as RunEvent[];
    const lines = attackLines(replyOf(events));
    assertEscapeFailed(lines, spec, nobody.homeSecret);
    // Without `--disable-userns` and the filter, nobody could nest one.
    assert.equal(lines["nested-userns"], "error EPERM");
  },
);

/** Fresh operator's `workspace-roots` made by `makeDir`, with a caller's workspace in it (of the same owner). */
function rootsWithWorkspace(
  makeDir: (prefix: string) => string = tempDir,
): { roots: string; workspace: string } {
  const roots = makeDir("escape-roots-");
  const workspace = join(roots, "ws");
  Deno.mkdirSync(workspace);
  const owner = Deno.statSync(roots);
  Deno.chownSync(workspace, owner.uid, owner.gid);
  return { roots, workspace };
}

/** Asserts the run completed confined, and both the agent's and its terminal's attack failed. */
function assertRunHeld(
  events: RunEvent[],
  spec: ReturnType<typeof escapeAttack>,
  homeSecret: string,
): { agent: Record<string, string>; terminal: Record<string, string> } {
  const wire = JSON.stringify(events).slice(-3000);
  assert.equal(events.at(-1)?.type, "run.completed", wire);
  assert.equal(
    events.find((event) => event.type === "run.started")?.data.sandbox,
    "confined",
    wire,
  );
  const reply = replyOf(events);
  const agent = attackLines(reply);
  const terminal = terminalAttackLines(reply);
  assertEscapeFailed(agent, spec, homeSecret);
  assertEscapeFailed(terminal, spec, homeSecret);
  return { agent, terminal };
}

/** The operator's flags of a confined runner the attacker's runs go through. */
function confinedFlags(options: {
  readPaths: string[];
  roots: string;
}): string[] {
  return [
    ...["--sandbox", "confined"],
    ...["--sandbox-read-paths", options.readPaths.join(",")],
    ...["--workspace-roots", options.roots],
    ...["--client-terminals", "true"],
  ];
}

Deno.test("runner serve --sandbox confined, started as root: a caller's attacker agent and its terminal command find no capability, and every escape call fails", async () => {
  assert.equal(Deno.uid(), 0, "this attack is on a runner started as root");
  const world = sandboxWorld();
  const spec = escapeAttack(world.homeSecret);
  const { roots, workspace } = rootsWithWorkspace();
  const serve = await attackServe({
    args: [
      ...confinedFlags({
        readPaths: [ROOT, DENO_DIR, spec.readOnlyDir],
        roots,
      }),
      ...["--env-json", JSON.stringify({ DENO_DIR })],
    ],
    environment: world.environment,
  });
  try {
    const events = await callerRun(serve, {
      provider: "custom",
      "acp-command": attackerCommand(...escapeFlags(spec)),
      workspace,
    });
    assertRunHeld(events, spec, world.homeSecret);
  } finally {
    await serve.stop();
  }
});

// Starting the runner as another user needs root (setpriv).
nobodyTest(
  "runner serve --sandbox confined, started as nobody: a caller's attacker agent and its terminal command find no capability, no nested user namespace, and every escape call fails",
  async (nobody) => {
    const spec = escapeAttack(
      nobody.homeSecret,
      nobodysDir("nobody-read-only-"),
    );
    const { roots, workspace } = rootsWithWorkspace(nobodysDir);
    const serve = await attackServe({
      dataDir: nobodysDir("nobody-data-"),
      wrapper: AS_NOBODY,
      environment: nobody.environment,
      args: [
        ...confinedFlags({
          readPaths: [ROOT, nobody.denoDir, spec.readOnlyDir],
          roots,
        }),
        ...["--env-json", JSON.stringify({ DENO_DIR: nobody.denoDir })],
      ],
    });
    try {
      const events = await callerRun(serve, {
        provider: "custom",
        "acp-command": attackerCommand(...escapeFlags(spec)),
        workspace,
      });
      const { agent, terminal } = assertRunHeld(
        events,
        spec,
        nobody.homeSecret,
      );
      // Without `--disable-userns` and the filter, nobody could nest one.
      assert.equal(agent["nested-userns"], "error EPERM");
      assert.equal(terminal["nested-userns"], "error EPERM");
    } finally {
      await serve.stop();
    }
  },
);

Deno.test("runner daemon --sandbox confined, started as root: a hub's attacker job and its terminal command find no capability, and every escape call fails", async () => {
  assert.equal(Deno.uid(), 0, "this attack is on a runner started as root");
  const world = sandboxWorld();
  const spec = escapeAttack(world.homeSecret);
  const { roots, workspace } = rootsWithWorkspace();
  const daemon = await attackDaemon({
    hubArgs: [
      ...["--client-terminals", "true"],
      ...["--env-json", JSON.stringify({ DENO_DIR })],
    ],
    daemonArgs: confinedFlags({
      readPaths: [ROOT, DENO_DIR, spec.readOnlyDir],
      roots,
    }),
    environment: world.environment,
  });
  try {
    const events = await daemon.run({
      provider: "custom",
      "acp-command": attackerCommand(...escapeFlags(spec)),
      workspace,
    });
    assertRunHeld(events, spec, world.homeSecret);
  } finally {
    assert.equal(await daemon.stop(), 0, daemon.logs());
  }
});
