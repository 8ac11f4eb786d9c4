/**
 * The sandbox through the real CLI: `runner probe` says whether this machine
 * can confine agents; a run asking for it where it cannot fails before the
 * agent starts (`sandbox.unavailable`); kill -9 of `runner run` takes its
 * confined agent down with it; `runner serve --sandbox confined` confines
 * every HTTP run.
 */

import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findOnPath } from "../../lib/agent/find_executable.ts";
import { ROOT, runCli, spawnCli, tempDir } from "../helpers.ts";
import {
  deltaText,
  postJson,
  sseEvents,
  startServe,
} from "../serve_test_helpers.ts";
import {
  assertKilledRunnerLeavesNothing,
  DENO_DIR,
  keysAsFlags,
  markedProcesses,
  sandboxKeys,
  type SandboxWorld,
  sandboxWorld,
} from "../sandbox_helpers.ts";

/** `runner probe` of the fixture in `world`'s confined run keys with `extra` keys, then `args`. */
function probeIn(
  world: SandboxWorld,
  extra: Record<string, unknown>,
  ...args: string[]
) {
  const keys = sandboxKeys(world, [], extra);
  return runCli(["probe", ...keysAsFlags(keys), ...args], {
    env: world.environment,
  });
}

Deno.test("runner probe --sandbox confined reports the sandbox available and the agent ready in it", async () => {
  const world = sandboxWorld();
  const result = await probeIn(world, {}, "--json");
  assert.equal(result.code, 0, result.stdout + result.stderr);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "ok");
  assert.deepEqual(report.sandbox, {
    available: true,
    mode: "confined",
    network: "full",
  });
  const human = await probeIn(world, { sandbox: "off" });
  assert.match(human.stdout, /^sandbox: available; this run: off$/m);
});

Deno.test("without bubblewrap, a run asking for sandbox=confined fails with sandbox.unavailable before its agent starts; probe says why", async () => {
  const world = sandboxWorld();
  const record = join(tempDir(), "record.jsonl");
  // The runner finds bwrap on its PATH (here one with only `ps`, which it
  // needs); the agent's command is absolute.
  const path = tempDir("path-without-bwrap-");
  Deno.symlinkSync(findOnPath("ps", Deno.env.get("PATH"))!, join(path, "ps"));
  const env = { ...world.environment, PATH: path };
  const keys = sandboxKeys(world, ["--record", record]);
  const result = await runCli(["run", ...keysAsFlags(keys), "hi"], { env });
  assert.equal(result.code, 1, result.stderr);
  assert.match(
    result.stderr,
    /error \[sandbox\.unavailable\]: sandbox=confined needs bubblewrap, which is not on the runner's PATH \(apt-get install bubblewrap/,
  );
  assert.throws(() => Deno.statSync(record), "the agent never started");
  const probe = await runCli(["probe", ...keysAsFlags(keys), "--json"], {
    env,
  });
  assert.equal(probe.code, 9);
  const report = JSON.parse(probe.stdout);
  assert.equal(report.outcome, "sandbox_unavailable");
  assert.equal(report.error.code, "sandbox.unavailable");
  assert.equal(report.sandbox.available, false);
  assert.equal(report.sandbox.mode, "confined");
  // Nor with no network (no pasta asked for): bubblewrap alone is missing.
  const none = await runCli([
    "probe",
    ...keysAsFlags({ ...keys, "sandbox-network": "none" }),
    "--json",
  ], { env });
  assert.equal(JSON.parse(none.stdout).sandbox.available, false);
});

/** A PATH directory holding `ps` and a `bwrap` that is `script`. */
function pathWithBwrap(script: string): string {
  const path = tempDir("path-with-bwrap-");
  Deno.symlinkSync(findOnPath("ps", Deno.env.get("PATH"))!, join(path, "ps"));
  Deno.writeTextFileSync(join(path, "bwrap"), script);
  Deno.chmodSync(join(path, "bwrap"), 0o755);
  return path;
}

Deno.test("a bubblewrap that cannot make namespaces here, or cannot be started at all: a confined run fails with sandbox.unavailable saying so, before its agent starts", async () => {
  const world = sandboxWorld();
  const cases = [
    {
      script:
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
      said:
        /error \[sandbox\.unavailable\]: sandbox=confined: bubblewrap \(\S+\/bwrap\) cannot create namespaces here \(bwrap: No permissions to create new namespace\)\. Allow user namespaces/,
    },
    {
      // What bwrap said is quoted, cut at 300 characters.
      script: `#!/bin/sh\necho 'bwrap: ${"x".repeat(400)}' >&2\nexit 1\n`,
      said: new RegExp(
        `cannot create namespaces here \\(bwrap: ${
          "x".repeat(293)
        }\\)\\. Allow`,
      ),
    },
    {
      script: "#!/nonexistent/interpreter\n",
      said:
        /error \[sandbox\.unavailable\]: sandbox=confined: bubblewrap \(\S+\/bwrap\) could not be started \(.+\)\./,
    },
  ];
  for (const { script, said } of cases) {
    const record = join(tempDir(), "record.jsonl");
    const env = { ...world.environment, PATH: pathWithBwrap(script) };
    const keys = sandboxKeys(world, ["--record", record]);
    const result = await runCli(["run", ...keysAsFlags(keys), "hi"], { env });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, said);
    assert.throws(() => Deno.statSync(record), "the agent never started");
  }
});

Deno.test("kill -9 of runner run takes its confined agent, the agent's stubborn grandchild included, down with it", async () => {
  const world = sandboxWorld();
  const keys = sandboxKeys(world, ["--stall-prompt", "--grandchild"]);
  const child = spawnCli(["run", ...keysAsFlags(keys), "--json", "hi"], {
    env: world.environment,
  });
  await assertKilledRunnerLeavesNothing(child, {
    marker: world.marker,
    until: '"message.delta"',
    whileAlive: () => assert.ok(markedProcesses(world.marker).length >= 5),
  });
});

Deno.test("runner serve --sandbox confined: a run over HTTP is confined and says so in run.started; a request cannot turn it off", async () => {
  const world = sandboxWorld();
  const serve = await startServe({
    dataDir: tempDir(),
    args: [
      "--allow-custom-commands",
      ...[
        "--sandbox",
        "confined",
        "--sandbox-read-paths",
        `${ROOT},${DENO_DIR}`,
      ],
      // A confined server takes a request's workspace only under its roots.
      ...["--workspace-roots", tmpdir()],
    ],
    env: world.environment,
  });
  try {
    const keys = sandboxKeys(world, ["--try-read", world.homeSecret]);
    const config = {
      provider: keys.provider,
      "acp-command": keys["acp-command"],
      workspace: keys.workspace,
    };
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config,
    });
    assert.equal(response.status, 200);
    const events = await sseEvents(response);
    assert.deepEqual(
      events.find((event) => event.type === "run.started")?.data,
      { agent: "cold", sandbox: "confined" },
    );
    assert.match(
      deltaText(events),
      new RegExp(`try-read ${world.homeSecret}: error NotFound`),
    );
    const refused = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config: { ...config, sandbox: "off" },
    });
    assert.equal(refused.status, 403);
    const body = await refused.json();
    assert.equal(body.error.code, "http.forbidden");
    assert.match(
      body.error.message,
      /^sandbox: the operator confines every run/,
    );
  } finally {
    await serve.stop();
  }
});
