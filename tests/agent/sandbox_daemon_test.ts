/**
 * The sandbox on a daemon's machine: the job runner with the real fixture
 * agent under a real bubblewrap. A hub may ask for `sandbox=confined` in
 * `run.start`; the daemon's own `--sandbox confined` holds whatever the hub
 * says, and only the daemon names sandbox paths. Over HTTP, likewise, a
 * caller can confine its run more than the operator, never less.
 */

import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { type DaemonSandbox, mapRunStart } from "../../lib/relay/payload.ts";
import { RunnerError } from "../../lib/errors.ts";
import {
  loadServeConfig,
  type ServeConfig,
} from "../../lib/server/config/serve_config.ts";
import { resolveCallerConfig } from "../../lib/server/policy.ts";
import { assertRelayFrame } from "../contracts.ts";
import {
  DAEMON_TOKEN,
  daemonProcess,
  hubJob,
  hubRunStartConfig,
  postDaemonRun,
} from "../daemon_test_helpers.ts";
import { deltaText, sseEvents, startServe } from "../serve_test_helpers.ts";
import { ROOT, runCli, tempDir } from "../helpers.ts";
import {
  confinedFixtureCommand,
  DENO_DIR,
  sandboxWorld,
} from "../sandbox_helpers.ts";

/** Runs one job; its wire events (checked against the relay contract) with their `runner` details. */
async function runJob(
  sandbox: DaemonSandbox,
  world: ReturnType<typeof sandboxWorld>,
  config: JsonObject,
): Promise<Array<{ event: JsonObject; runner?: JsonObject }>> {
  const runner = createDaemonJobRunner({
    environment: world.environment,
    sandbox,
    // A confined daemon takes a hub's workspace only under its roots.
    floor: { workspaceRoots: [tmpdir()] },
  });
  const frames: Array<{ event: JsonObject; runner?: JsonObject }> = [];
  const job = hubJob(
    "job-s",
    { run_id: "r", prompt_text: "hi", config },
    (event, details) => {
      assertRelayFrame({
        type: "run.event",
        job_id: "job-s",
        event,
        ...(details ? { runner: details } : {}),
      }, "daemon->hub");
      frames.push({ event, runner: details });
    },
  );
  assert.deepEqual(await runner.runJob(job), { cleanupConfirmed: true });
  return frames;
}

function startedSandbox(
  frames: Array<{ event: JsonObject; runner?: JsonObject }>,
) {
  const started = frames.find((frame) => frame.event.type === "run.started");
  return (started?.event.data as JsonObject | undefined)?.sandbox;
}

const OWN_PATHS = { sandboxReadPaths: [ROOT, DENO_DIR], sandboxWritePaths: [] };

Deno.test("runner daemon --sandbox confined confines a job whose run.start asks sandbox=off, and ignores the hub's sandbox paths", async () => {
  const world = sandboxWorld();
  const hubPath = tempDir("hub-named-");
  const hubFile = join(hubPath, "f.txt");
  Deno.writeTextFileSync(hubFile, "hub named\n");
  const frames = await runJob(
    { sandbox: "confined", sandboxNetwork: "full", ...OWN_PATHS },
    world,
    {
      provider: "custom",
      acp_command: confinedFixtureCommand(
        ...["--try-read", world.homeSecret, "--try-read", hubFile],
        ...["--try-write", "out.txt"],
      ),
      cwd: tempDir("daemon-ws-"),
      env: { DENO_DIR, SANDBOX_TEST_MARK: world.marker },
      sandbox: "off",
      sandbox_read_paths: [hubPath],
      langbot_assets_enabled: false,
    },
  );
  const wire = JSON.stringify(frames);
  assert.equal(frames.at(-1)?.event.type, "run.completed", wire);
  assert.equal(startedSandbox(frames), "confined");
  assert.match(
    wire,
    new RegExp(`try-read ${world.homeSecret}: error NotFound`),
  );
  assert.match(wire, new RegExp(`try-read ${hubFile}: error NotFound`));
  assert.match(wire, /try-write out\.txt: ok/);
});

Deno.test("a daemon that does not require the sandbox confines a job whose run.start asks sandbox=confined", async () => {
  const world = sandboxWorld();
  const ask = (sandbox: string) =>
    runJob({ sandbox: "off", sandboxNetwork: "full", ...OWN_PATHS }, world, {
      provider: "custom",
      acp_command: confinedFixtureCommand("--try-read", world.homeSecret),
      cwd: tempDir("daemon-ws-"),
      env: { DENO_DIR },
      sandbox,
      langbot_assets_enabled: false,
    });
  const confined = await ask("confined");
  assert.equal(startedSandbox(confined), "confined");
  assert.match(JSON.stringify(confined), /secret\.txt: error NotFound/);
  const off = await ask("off");
  assert.equal(startedSandbox(off), "off");
  assert.match(JSON.stringify(off), /secret\.txt: ok home secret/);
});

Deno.test("run.start mapping: the daemon's confined and none hold against the hub's off and full; sandbox paths come from the daemon alone", () => {
  const plan = mapRunStart({
    prompt_text: "hi",
    config: {
      provider: "codex",
      cwd: "/srv/w",
      sandbox: "off",
      sandbox_network: "full",
      sandbox_write_paths: ["/home/al/.ssh"],
      langbot_assets_enabled: false,
    },
  }, {
    jobId: "j",
    fallbackCwd: "/srv",
    sandbox: {
      sandbox: "confined",
      sandboxNetwork: "none",
      sandboxReadPaths: ["/opt/tools"],
      sandboxWritePaths: [],
    },
  });
  assert.equal(plan.config.sandbox, "confined");
  assert.equal(plan.config.sandboxNetwork, "none");
  assert.deepEqual(plan.config.sandboxReadPaths, ["/opt/tools"]);
  assert.deepEqual(plan.config.sandboxWritePaths, []);
  assert.deepEqual(plan.ignoredKeys, ["sandbox_write_paths"]);
});

Deno.test("the hub asks for the sandbox in run.start only when the run wants it confined", () => {
  assert.equal(hubRunStartConfig({}).sandbox, undefined);
  const confined = hubRunStartConfig({
    sandbox: "confined",
    "sandbox-network": "none",
    "langbot-assets-enabled": false,
    "sandbox-read-paths": ["/hub/only"],
  });
  assert.equal(confined.sandbox, "confined");
  assert.equal(confined.sandbox_network, "none");
  assert.equal(confined.sandbox_read_paths, undefined, "paths stay on the hub");
});

Deno.test("over HTTP a caller may confine its run more than the operator, never less; sandbox paths are operator only", async () => {
  const serve = async (args: string[]) =>
    await loadServeConfig(["--data-dir", tempDir(), ...args], {
      env: {},
    }) as ServeConfig;
  const base = { provider: "codex", workspace: "/srv/w" };
  const open = await serve([]);
  assert.equal(
    resolveCallerConfig(open, { ...base, sandbox: "confined" }).sandbox,
    "confined",
  );
  const strict = await serve([
    ...["--sandbox", "confined", "--sandbox-network", "none"],
    ...["--langbot-assets-enabled", "false", "--workspace-roots", "/srv"],
  ]);
  for (
    const [key, value] of [["sandbox", "off"], ["sandbox-network", "full"]]
  ) {
    assert.throws(
      () => resolveCallerConfig(strict, { ...base, [key]: value }),
      (error: unknown) =>
        error instanceof RunnerError && error.code === "http.forbidden" &&
        error.message.startsWith(`${key}: the operator confines every run`),
      key,
    );
  }
  assert.equal(resolveCallerConfig(strict, base).sandboxNetwork, "none");
  for (const key of ["sandbox-read-paths", "sandbox-write-paths"]) {
    assert.throws(
      () => resolveCallerConfig(open, { ...base, [key]: ["/home/al/.ssh"] }),
      (error: unknown) =>
        error instanceof RunnerError && error.code === "http.forbidden",
      key,
    );
  }
});

Deno.test("a real runner daemon --sandbox confined runs the hub's job confined: the agent does its work in the workspace and cannot see the daemon user's home", async () => {
  const world = sandboxWorld();
  const serve = await startServe({
    dataDir: tempDir(),
    args: [
      ...["--allow-custom-commands", "--daemon-enabled", "--daemon-port", "0"],
      ...["--daemon-token", DAEMON_TOKEN],
      ...["--env-json", JSON.stringify({ DENO_DIR })],
    ],
  });
  const hubLine = await serve.waitForLog((entry) =>
    entry.msg === "daemon hub listening"
  );
  const tokenFile = join(tempDir(), "token");
  Deno.writeTextFileSync(tokenFile, DAEMON_TOKEN + "\n");
  const daemon = daemonProcess(String(hubLine.url), "boxed-1", tokenFile, {
    args: [
      ...["--sandbox", "confined"],
      ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
      ...["--workspace-roots", tmpdir()],
    ],
    env: world.environment,
  });
  try {
    await daemon.connected;
    const workspace = tempDir("daemon-ws-");
    const response = await postDaemonRun(serve.url, {
      daemonId: "boxed-1",
      config: {
        workspace,
        "acp-command": confinedFixtureCommand(
          ...["--try-read", world.homeSecret, "--try-write", "done.txt"],
        ),
      },
    });
    assert.equal(response.status, 200);
    const events = await sseEvents(response);
    assert.equal(events.at(-1)?.type, "run.completed", JSON.stringify(events));
    assert.equal(
      events.find((event) => event.type === "run.started")?.data.sandbox,
      "confined",
    );
    const text = deltaText(events);
    assert.match(
      text,
      new RegExp(`try-read ${world.homeSecret}: error NotFound`),
    );
    assert.match(text, /try-write done\.txt: ok/);
    assert.equal(
      Deno.readTextFileSync(join(workspace, "done.txt")),
      "written by the fixture itself\n",
    );
  } finally {
    assert.equal(await daemon.stop(), 0);
    await serve.stop();
  }
});

Deno.test("runner daemon --sandbox confined does not start where it cannot confine agents", async () => {
  const result = await runCli([
    ...["daemon", "--url", "ws://127.0.0.1:9", "--daemon-id", "boxed-2"],
    ...["--token", DAEMON_TOKEN, "--sandbox", "confined"],
  ], { env: { PATH: tempDir("path-without-bwrap-") } });
  assert.equal(result.code, 2, result.stderr);
  assert.match(
    result.stderr,
    /error \[sandbox\.unavailable\]: sandbox=confined needs bubblewrap/,
  );
});
