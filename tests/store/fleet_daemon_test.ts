import assert from "node:assert/strict";
import { join } from "node:path";
import {
  daemonCliArgs,
  fixtureCommand,
  isAlive,
  runCli,
  spawnCli,
  tempDir as tempDirNow,
} from "../helpers.ts";
import { clusterForThisFile, pgTest } from "../pg_helpers.ts";
import {
  apiFetch,
  makeFifo,
  postJson,
  readSse,
  readUntil,
  tempDir,
} from "../serve_test_helpers.ts";
import {
  eventually,
  FLEET_API_TOKEN,
  postMessage,
  withTwoReplicas,
} from "../fleet_helpers.ts";
import {
  DAEMON_TOKEN,
  daemonTokenFile,
  hubUrlOf,
  watchDaemonLog,
} from "../daemon_test_helpers.ts";

const cluster = clusterForThisFile();

/** A `runner daemon` dialling `hubUrl`; resolves `connected` once accepted. */
function startDaemon(hubUrl: string, daemonId: string, tokenFile: string) {
  const child = spawnCli(
    daemonCliArgs(
      hubUrl,
      daemonId,
      "--token-file",
      tokenFile,
      "--data-dir",
      tempDirNow(),
    ),
  );
  const { connected, drained } = watchDaemonLog(child, daemonId);
  return {
    connected,
    async kill(signal: Deno.Signal) {
      try {
        child.kill(signal);
      } catch { /* gone */ }
      await child.status;
      await child.stdout.cancel();
      await drained;
    },
  };
}

const DAEMON_ARGS = [
  "--daemon-enabled",
  "--daemon-port",
  "0",
  "--daemon-token",
  DAEMON_TOKEN,
];

pgTest(
  "a daemon connected to A serves a run posted to B; its fence set on A is refused on B; every replica lists the same daemons",
  async () => {
    const url = await cluster().newDatabase();
    await withTwoReplicas(url, async (a, b) => {
      const hubUrl = await hubUrlOf(a);
      const daemon = startDaemon(hubUrl, "laptop-9", daemonTokenFile());
      const pidFile = join(await tempDir(), "pids.json");
      try {
        await daemon.connected;
        const listedOnB = await eventually(async () => {
          const body = await (await apiFetch(`${b.url}/v1/daemons`)).json();
          return body.daemons.length ? body : undefined;
        }, "B to see the daemon");
        assert.deepEqual(
          listedOnB.daemons.map((d: Record<string, unknown>) => [
            d.daemon_id,
            d.connected,
            d.fenced,
            d.replica_id,
          ]),
          [["laptop-9", true, false, "a"]],
        );

        const config = (flags: string[]) => ({
          provider: "custom",
          location: "daemon",
          "daemon-id": "laptop-9",
          workspace: tempDirNow(),
          "acp-command": fixtureCommand(...flags),
        });
        const served = await postMessage(b.url, {
          conversation: "d-conv",
          text: "via B",
          config: config([]),
        });
        assert.equal(served.headers.get("x-runner-replica"), "a");
        const body = await served.json();
        assert.equal(body.status, "completed", JSON.stringify(body));
        assert.equal(body.message, "echo: via B (turn 1)");

        // A job in flight when the daemon dies: A fences laptop-9.
        const gate = join(await tempDir(), "gate");
        await makeFifo(gate);
        const held = await postJson(`${b.url}/v1/runs`, {
          input: { text: "held" },
          config: config(["--gate-fifo", gate, "--pid-file", pidFile]),
        });
        const stream = readSse(held.body!);
        await readUntil(stream, [], (m) => m.event === "message.delta");
        await daemon.kill("SIGKILL");
        for await (const _ of stream) { /* the run fails on A */ }

        await eventually(async () => {
          const body = await (await apiFetch(`${b.url}/v1/daemons`)).json();
          return body.daemons.some((d: Record<string, unknown>) => d.fenced)
            ? true
            : undefined;
        }, "B to see the fence");
        const refused = await postJson(`${b.url}/v1/runs`, {
          input: { text: "refused" },
          config: config([]),
        });
        assert.equal(refused.status, 409);
        assert.equal(
          (await refused.json()).error.code,
          "agent_runtime.daemon_fenced",
        );

        const list = (url: string) =>
          runCli([
            "daemons",
            "list",
            "--json",
            "--url",
            url,
            "--api-token",
            FLEET_API_TOKEN,
          ]);
        const fromA = await list(a.url);
        const fromB = await list(b.url);
        assert.equal(fromA.code, 0, fromA.stderr);
        assert.equal(fromA.stdout, fromB.stdout);
        assert.deepEqual(
          JSON.parse(fromB.stdout).map((row: Record<string, unknown>) => [
            row.daemon_id,
            row.fenced,
          ]),
          [["laptop-9", true]],
        );
      } finally {
        await daemon.kill("SIGTERM");
        try {
          const pids = JSON.parse(Deno.readTextFileSync(pidFile));
          for (const pid of Object.values(pids) as number[]) {
            if (isAlive(pid)) Deno.kill(pid, "SIGKILL");
          }
        } catch { /* no held run */ }
      }
    }, DAEMON_ARGS);
  },
);
