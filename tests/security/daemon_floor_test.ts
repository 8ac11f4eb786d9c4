/**
 * The attacker hub: a hub's `run.start` to a daemon under `--sandbox
 * confined` that sends every widening key (a session cwd outside the
 * workspace, a workspace in the daemon's data dir, home or `/`, a mode the
 * daemon did not list, remembered values outside its choices) is refused by
 * the daemon before any agent starts. Issue 35, break 3 through a hub.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import { daemonFloorFromFlags } from "../../lib/daemon/job_floor.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { RunnerError } from "../../lib/errors.ts";
import { entryExists, tempDir } from "../helpers.ts";
import {
  confinedFixtureCommand,
  DENO_DIR,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import { ROOT } from "../helpers.ts";
import {
  hubJob,
  postDaemonRun,
  serveWithDaemon,
} from "../daemon_test_helpers.ts";
import { sseEvents } from "../serve_test_helpers.ts";

const TOKEN = "daemon-floor-token-" + crypto.randomUUID();
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** One job on a confined daemon with its own floor; the events it sent. */
async function runJob(
  world: { environment: Record<string, string>; dataDir: string },
  floor: Record<string, unknown>,
  config: JsonObject,
): Promise<JsonObject[]> {
  const runner = createDaemonJobRunner({
    environment: world.environment,
    sandbox: {
      sandbox: "confined",
      sandboxNetwork: "none",
      sandboxReadPaths: [ROOT, DENO_DIR],
      sandboxWritePaths: [],
    },
    floor: daemonFloorFromFlags(floor, world.dataDir),
  });
  const events: JsonObject[] = [];
  const job = hubJob(
    "job-f",
    { run_id: "r-f", prompt_text: "hi", config },
    (event) => events.push(event),
  );
  assert.deepEqual(await runner.runJob(job), { cleanupConfirmed: true });
  return events;
}

function failure(events: JsonObject[]): JsonObject | undefined {
  const last = events.at(-1);
  return last?.type === "run.failed" ? last.data as JsonObject : undefined;
}

Deno.test("a confined daemon refuses a hub's widening run.start before any agent starts", async () => {
  const world = sandboxWorld();
  const dataDir = tempDir("daemon-data-");
  const roots = tempDir("daemon-roots-");
  const workspace = join(roots, "ws");
  Deno.mkdirSync(workspace);
  const toData = join(workspace, "to-data");
  Deno.symlinkSync(dataDir, toData);
  const toRoot = join(workspace, "to-root");
  Deno.symlinkSync("/", toRoot);
  // In the workspace: the one place a confined agent may write.
  const marker = join(workspace, "started");
  const flags = {
    "workspace-roots": roots,
    "caller-modes": "plan",
    "caller-session-config-keys": "verbose",
  };
  const base: JsonObject = {
    provider: "custom",
    acp_command: confinedFixtureCommand("--pid-file", marker),
    env: { DENO_DIR },
    langbot_assets_enabled: false,
  };
  const attacks: Array<[Record<string, unknown>, JsonObject, string]> = [
    [flags, { cwd: workspace, session_cwd: "/" }, "session-cwd"],
    [flags, { cwd: workspace, session_cwd: toRoot }, "session-cwd"],
    [{ ...flags, "fs-read": "true", "fs-write": "true" }, {
      cwd: workspace,
      session_cwd: "/",
      fs_read: true,
      fs_write: true,
    }, "session-cwd"],
    [flags, { cwd: dataDir }, "workspace"],
    [flags, { cwd: toData }, "workspace"],
    [flags, { cwd: world.home }, "workspace"],
    [flags, { cwd: "/" }, "workspace"],
    [flags, { workspace: "/root/x" }, "workspace"],
    [flags, { cwd: `${workspace}/../../x` }, "workspace"],
    [flags, { cwd: workspace, mode: "bypassPermissions" }, "mode"],
    [flags, {
      cwd: workspace,
      session_config_json: { mode: "bypassPermissions" },
    }, "session-config-json"],
    // Roots that hold the daemon's own places never open them.
    [{ "workspace-roots": "/" }, { cwd: dataDir }, "workspace"],
    [{ "workspace-roots": "/" }, { cwd: toData }, "workspace"],
    [{ "workspace-roots": "/" }, { cwd: world.home }, "workspace"],
    [{ "workspace-roots": "/" }, { cwd: "/" }, "workspace"],
    // No roots named: a confined daemon takes no workspace from its hub.
    [{}, { cwd: workspace }, "workspace"],
  ];
  for (const [floor, config, key] of attacks) {
    const events = await runJob({ ...world, dataDir }, floor, {
      ...base,
      ...config,
    });
    const failed = failure(events);
    assert.ok(failed, `accepted: ${JSON.stringify(config)}`);
    assert.equal(failed.code, "http.forbidden", JSON.stringify(failed));
    assert.match(String(failed.error), new RegExp(`^${key}:`));
    assert.ok(
      !events.some((event) => event.type === "run.started"),
      JSON.stringify(events),
    );
  }
  assert.throws(() => Deno.lstatSync(marker), Deno.errors.NotFound);

  // Remembered values from the hub outside the daemon's choices are not asked for.
  const events = await runJob({ ...world, dataDir }, flags, {
    ...base,
    acp_command: confinedFixtureCommand(
      ...["--pid-file", marker, "--session-config", "both"],
    ),
    cwd: workspace,
    stored_session_config: {
      mode: "acceptEdits",
      config: { effort: "high" },
    },
  });
  const wire = JSON.stringify(events);
  assert.equal(events.at(-1)?.type, "run.completed", wire);
  Deno.lstatSync(marker);
  const configured = events.find((event) => event.type === "session.configured")
    ?.data as JsonObject | undefined;
  assert.ok(configured, wire);
  assert.notEqual(configured.mode, "acceptEdits", wire);
  assert.notEqual((configured.config as JsonObject).effort, "high", wire);
});

Deno.test("a real runner daemon --sandbox confined --workspace-roots holds a hub's run.start from runner serve to its own floor", async () => {
  const world = sandboxWorld();
  const roots = tempDir("daemon-roots-");
  const workspace = join(roots, "ws");
  Deno.mkdirSync(workspace);
  const outside = tempDir("daemon-outside-");
  const marker = join(workspace, "started");
  Deno.writeTextFileSync(join(workspace, "inside.txt"), "inside-value\n");
  const { serve, daemon } = await serveWithDaemon("floor-1", {
    serveArgs: [
      ...["--api-token", TOKEN, "--env-json", JSON.stringify({ DENO_DIR })],
      // The hub's own operator allows these: the daemon is what refuses.
      ...["--fs-read", "true", "--fs-write", "true"],
    ],
    daemonArgs: [
      ...["--sandbox", "confined", "--sandbox-network", "none"],
      ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
      ...["--workspace-roots", roots, "--caller-modes", "plan"],
    ],
    daemonEnv: world.environment,
  });
  const run = async (config: Record<string, unknown>) => {
    const response = await postDaemonRun(serve.url, {
      daemonId: "floor-1",
      config: {
        "langbot-assets-enabled": false,
        "acp-command": confinedFixtureCommand(
          ...["--pid-file", marker, "--session-config", "both"],
          ...["--fs-read", join(workspace, "inside.txt")],
          ...["--fs-write", join(workspace, "written.txt")],
        ),
        ...config,
      },
    }, AUTH);
    assert.equal(response.status, 200, await response.clone().text());
    return await sseEvents(response);
  };
  try {
    await daemon.connected;
    const attacks: Array<[Record<string, unknown>, string]> = [
      [{ workspace: outside }, "workspace"],
      [{ workspace: "/" }, "workspace"],
      [{ workspace, mode: "bypassPermissions" }, "mode"],
      [
        { workspace, "session-config-json": { mode: "acceptEdits" } },
        "session-config-json",
      ],
      [{ "session-cwd": "/", "fs-read": true }, "session-cwd"],
    ];
    for (const [config, key] of attacks) {
      const events = await run(config);
      const wire = JSON.stringify(events);
      const last = events.at(-1);
      assert.equal(last?.type, "run.failed", wire);
      assert.equal(last.data.code, "http.forbidden", wire);
      assert.match(String(last.data.error), new RegExp(`^${key}:`), wire);
      assert.ok(!entryExists(marker), `an agent started for ${wire}`);
    }
    // What the daemon allows still runs, confined, in the workspace; the
    // hub's fs-read and fs-write (its operator turned them on) stay off.
    const events = await run({
      workspace,
      mode: "plan",
      "fs-read": true,
      "fs-write": true,
    });
    const wire = JSON.stringify(events);
    assert.equal(events.at(-1)?.type, "run.completed", wire);
    assert.equal(
      events.find((event) => event.type === "run.started")?.data.sandbox,
      "confined",
      wire,
    );
    assert.ok(entryExists(marker), "the allowed job's agent did not start");
    assert.match(wire, /fs-read [^ ]*inside\.txt: error/);
    assert.doesNotMatch(wire, /inside-value/);
    assert.match(wire, /fs-write [^ ]*written\.txt: error/);
    assert.ok(!entryExists(join(workspace, "written.txt")), "fs-write served");
  } finally {
    assert.equal(await daemon.stop(), 0, "every frame fit the contract");
    await serve.stop();
  }
});

Deno.test("runner daemon's --fs-read and --fs-write are off unless given, and checked like the run-config keys", () => {
  const dataDir = tempDir("daemon-data-");
  const off = daemonFloorFromFlags({}, dataDir);
  assert.deepEqual([off.fsRead, off.fsWrite], [false, false]);
  const on = daemonFloorFromFlags({ "fs-read": "true" }, dataDir);
  assert.deepEqual([on.fsRead, on.fsWrite], [true, false]);
  assert.throws(
    () => daemonFloorFromFlags({ "fs-write": "maybe" }, dataDir),
    (error: unknown) =>
      error instanceof RunnerError && error.code === "config.invalid",
  );
});
