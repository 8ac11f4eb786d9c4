/**
 * Settings an attacker or a typo could abuse: numbers parsed strictly,
 * per-request size limits capped by the operator's, prototype names as
 * unknown keys, API token strength off loopback, a fleet's cluster token
 * strength everywhere, secrets read from files (which win over the flags),
 * and the open-file limit raised at start.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  fitConnectionCap,
  raiseFileLimit,
} from "../../lib/cli/serve/file_limit.ts";
import { RunnerError } from "../../lib/errors.ts";
import {
  loadServeConfig,
  type ServeConfig,
} from "../../lib/server/config/serve_config.ts";
import { resolveCallerConfig } from "../../lib/server/policy.ts";
import { ROOT, runCli, tempDir } from "../helpers.ts";
import { startServe } from "../serve_test_helpers.ts";

const STRONG = "strong-api-token-Qm7Xv2Lp9Rt4Wz6Yk1";
const FILE_TOKEN = "file-daemon-token-Hc3Jn8Bv5Mx2Qs7Td4";
const FLAG_TOKEN = "flag-daemon-token-Pw6Ke1Zr9Ga4Ly3Uf8";

async function serveConfig(args: string[]): Promise<ServeConfig> {
  return await loadServeConfig(["--data-dir", tempDir(), ...args], {
    env: {},
  }) as ServeConfig;
}

function refusal(code: string, pattern: RegExp) {
  return (error: unknown) => {
    assert.ok(error instanceof RunnerError, String(error));
    assert.equal(error.code, code);
    assert.match(error.message, pattern);
    return true;
  };
}

Deno.test('numbers are decimal only: 0x10, 1e3 and Infinity are refused, 16 and "16" are not', async () => {
  const serve = await serveConfig([]);
  const base = { provider: "codex", workspace: "/srv/w" };
  for (const bad of ["0x10", "1e3", "Infinity", "+5", "16s", " "]) {
    assert.throws(
      () => resolveCallerConfig(serve, { ...base, timeout: bad }),
      refusal("config.invalid", /^timeout: must be a number/),
      bad,
    );
  }
  assert.equal(
    resolveCallerConfig(serve, { ...base, timeout: 16 }).timeout,
    16,
  );
  assert.equal(
    resolveCallerConfig(serve, { ...base, timeout: "16" }).timeout,
    16,
  );
  await assert.rejects(
    () => serveConfig(["--max-connections", "0x10"]),
    refusal("config.invalid", /^max-connections: must be a number/),
  );
});

Deno.test("per-request size limits cannot exceed the operator's", async () => {
  const base = { provider: "codex", workspace: "/srv/w" };
  const defaults = await serveConfig([]);
  assert.throws(
    () => resolveCallerConfig(defaults, { ...base, "max-message-mb": 1e9 }),
    refusal("config.invalid", /^max-message-mb: at most 64 per request/),
  );
  assert.equal(
    resolveCallerConfig(defaults, { ...base, "max-message-mb": 8 })
      .maxMessageMb,
    8,
  );
  const raised = await serveConfig(["--max-prompt-mb", "100"]);
  assert.equal(
    resolveCallerConfig(raised, { ...base, "max-prompt-mb": 90 }).maxPromptMb,
    90,
  );
  assert.throws(
    () => resolveCallerConfig(raised, { ...base, "max-prompt-mb": 101 }),
    refusal("config.invalid", /at most 100/),
  );
});

Deno.test("prototype names are unknown config keys (400), not operator-only ones (403)", async () => {
  const serve = await serveConfig([]);
  for (
    const key of ["constructor", "toString", "__proto__", "hasOwnProperty"]
  ) {
    assert.throws(
      () =>
        resolveCallerConfig(
          serve,
          JSON.parse(`{"provider": "codex", ${JSON.stringify(key)}: {"x": 1}}`),
        ),
      refusal("config.invalid", /unknown config key/),
      key,
    );
  }
});

Deno.test("a weak --api-token is refused off loopback", async () => {
  const weak = await runCli(["serve", "--host", "0.0.0.0", "--api-token", "x"]);
  assert.equal(weak.code, 2);
  assert.match(
    weak.stderr,
    /config\.invalid.*--api-token is refused: it is shorter than 32/,
  );
  assert.doesNotMatch(weak.stderr, /listening/);
});

Deno.test("token and env-json files keep secrets out of ps and win over the flags", async () => {
  const dir = tempDir();
  const write = (name: string, text: string) => {
    Deno.writeTextFileSync(join(dir, name), text);
    return join(dir, name);
  };
  const config = await serveConfig([
    "--api-token",
    "flag-api-token",
    "--api-token-file",
    write("api", `${STRONG}\n`),
    "--daemon-token",
    FLAG_TOKEN,
    "--daemon-token-file",
    write("daemon", `${FILE_TOKEN}\n`),
    "--env-json",
    '{"FROM_FLAG": "1"}',
    "--env-json-file",
    write("env.json", '{"API_KEY": "file-secret-value"}'),
  ]);
  assert.equal(config.apiToken, STRONG);
  assert.equal(config.daemon.token, FILE_TOKEN);
  assert.deepEqual(JSON.parse(String(config.runDefaults["env-json"])), {
    API_KEY: "file-secret-value",
  });
  await assert.rejects(
    () => serveConfig(["--api-token-file", join(dir, "missing")]),
    refusal("config.invalid", /--api-token-file .*cannot read the file/),
  );
});

Deno.test("a fleet's --cluster-token-file wins over the flag; a weak cluster token is refused, on loopback too", async () => {
  const dir = tempDir();
  const file = join(dir, "cluster-token");
  Deno.writeTextFileSync(file, `${STRONG}\n`);
  const store = ["--store", "postgres://runner@127.0.0.1:1/fleet"];
  const config = await serveConfig([
    ...store,
    "--cluster-token",
    FLAG_TOKEN,
    "--cluster-token-file",
    file,
  ]);
  assert.equal(config.fleet?.clusterToken, STRONG);
  const weak = await runCli([
    "serve",
    "--port",
    "0",
    ...store,
    "--advertise-url",
    "http://127.0.0.1:1",
    "--cluster-token",
    "x",
  ]);
  assert.equal(weak.code, 2);
  assert.match(
    weak.stderr,
    /config\.invalid.*--cluster-token is refused: it is shorter than 32/,
  );
  assert.doesNotMatch(weak.stderr, /listening|joined the fleet/);
});

Deno.test("with --daemon-token and --daemon-token-file, daemons must send the file's token", async () => {
  const dir = tempDir();
  const tokenFile = join(dir, "daemon-token");
  Deno.writeTextFileSync(tokenFile, `${FILE_TOKEN}\n`);
  const serve = await startServe({
    dataDir: join(dir, "data"),
    args: [
      "--daemon-enabled",
      "--daemon-port",
      "0",
      "--daemon-token",
      FLAG_TOKEN,
      "--daemon-token-file",
      tokenFile,
    ],
  });
  try {
    const hub = String(
      (await serve.waitForLog((e) => e.msg === "daemon hub listening")).url,
    );
    const answer = async (token: string) => {
      const ws = new WebSocket(hub);
      await new Promise((resolve) =>
        ws.addEventListener("open", resolve, { once: true })
      );
      const first = new Promise<string>((resolve) => {
        ws.addEventListener(
          "message",
          (e) => resolve(JSON.parse(e.data).type),
          { once: true },
        );
        ws.addEventListener(
          "close",
          (e) => resolve(`closed ${e.code} ${e.reason}`),
          { once: true },
        );
      });
      ws.send(JSON.stringify({
        type: "daemon.hello",
        daemon_id: `d-${token.slice(0, 4)}`,
        protocol: "coding-relay-v1",
        token,
        metadata: {},
      }));
      const result = await first;
      if (ws.readyState === WebSocket.OPEN) {
        const closed = new Promise((resolve) =>
          ws.addEventListener("close", resolve)
        );
        ws.close();
        await closed;
      }
      return result;
    };
    assert.equal(await answer(FLAG_TOKEN), "closed 1008 invalid token");
    assert.equal(await answer(FILE_TOKEN), "daemon.ready");
  } finally {
    await serve.stop();
  }
});

const hasPrlimit = (() => {
  try {
    return new Deno.Command("prlimit", { args: ["--version"] }).outputSync()
      .success;
  } catch {
    return false;
  }
})();

Deno.test({
  name: "the soft open-file limit is raised to the hard one with prlimit",
  ignore: !hasPrlimit,
  async fn() {
    // A child lowers its own soft limit first (the deno CLI raises it at start).
    const script = `
      import { raiseFileLimit, readFileLimit } from ${
      JSON.stringify(`${ROOT}lib/cli/serve/file_limit.ts`)
    };
      const hard = readFileLimit().hard;
      await new Deno.Command("prlimit", { args: ["--pid", String(Deno.pid), "--nofile=256:" + hard] }).output();
      const before = readFileLimit();
      const after = await raiseFileLimit();
      console.log(JSON.stringify({ before, after, hard }));`;
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["eval", script],
      stdout: "piped",
    }).output();
    const { before, after, hard } = JSON.parse(
      new TextDecoder().decode(output.stdout),
    );
    assert.equal(before.soft, 256);
    assert.equal(after.soft, hard);
    assert.equal(after.raisedFrom, 256);
    assert.equal(await raiseFileLimit().then((l) => l.soft), hard);
  },
});

Deno.test("the connection cap fits under half the open-file limit", () => {
  assert.equal(fitConnectionCap(1000, { soft: 256, hard: 4096 }), 128);
  assert.equal(fitConnectionCap(1000, { soft: 65536, hard: 65536 }), 1000);
  assert.equal(fitConnectionCap(1000, {}), 1000);
});
