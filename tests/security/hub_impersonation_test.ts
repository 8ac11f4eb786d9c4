/**
 * Impersonating a daemon at `runner serve`'s hub from the same machine: a
 * local process, or an unconfined agent of another run (`sandbox=off`, the
 * worst case), says `daemon.hello` on loopback as a daemon that is not
 * connected, hoping for its `run.start` jobs (prompts, config, sessions).
 * Loopback is not a daemon: with the default options the hub wants the
 * daemon token it keeps in its data dir, the impostor is refused before any
 * frame, and the real `runner daemon` (which finds the kept token itself)
 * then takes the job.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { REFUSAL_REASONS } from "../../lib/relay.ts";
import type { RunnerError } from "../../lib/errors.ts";
import { createHub } from "../../lib/hub/relay_hub.ts";
import { startHubListener } from "../../lib/locations/daemon.ts";
import { runCli, spawnCli, tempDir } from "../helpers.ts";
import { daemonProcess, keptDaemonToken } from "../daemon_test_helpers.ts";
import {
  apiFetch,
  deltaText,
  fixtureConfig,
  postJson,
  readSse,
  type ServeProcess,
  spawnServe,
  startServe,
} from "../serve_test_helpers.ts";

/** `runner serve` with its hub on a free port and the defaults otherwise. */
async function serveWithHub(
  dataDir: string,
  args: string[] = [],
): Promise<{ serve: ServeProcess; hubUrl: string; hubLine: unknown }> {
  const serve = await startServe({
    dataDir,
    args: [
      ...["--allow-custom-commands", "--daemon-enabled", "--daemon-port", "0"],
      ...args,
    ],
  });
  const hubLine = await serve.waitForLog((entry) =>
    entry.msg === "daemon hub listening"
  );
  return { serve, hubUrl: String(hubLine.url), hubLine };
}

/** What the hub does with one hello: every frame it sent, then its close. */
async function sayHello(
  url: string,
  hello: Record<string, unknown>,
): Promise<{ frames: string[]; closed?: [number, string] }> {
  const ws = new WebSocket(url);
  const frames: string[] = [];
  const ready = Promise.withResolvers<void>();
  const closed = Promise.withResolvers<[number, string]>();
  ws.addEventListener("open", () => {
    ws.send(JSON.stringify(hello));
  });
  ws.addEventListener("message", (event) => {
    frames.push(String(JSON.parse(String(event.data)).type));
    ready.resolve();
  });
  ws.addEventListener("close", (event) => {
    closed.resolve([event.code, event.reason]);
    ready.resolve();
  });
  await ready.promise;
  if (frames.length) {
    // Taken: the impostor gives the ID back (a refusal needs nothing more).
    ws.close();
    await closed.promise;
    return { frames };
  }
  return { frames, closed: await closed.promise };
}

/** A daemon run for `daemonId` that waits for it; its SSE events. */
async function victimRun(
  serve: ServeProcess,
  daemonId: string,
  workspace: string,
) {
  const response = await postJson(`${serve.url}/v1/runs`, {
    conversation_id: "victim-conversation",
    input: { text: "the victim's secret prompt" },
    config: {
      ...fixtureConfig(workspace),
      location: "daemon",
      "daemon-id": daemonId,
      // The daemon connects once the attacks are over, however slow this machine.
      "daemon-connect-timeout": 600,
    },
  });
  assert.equal(response.status, 200);
  const events: RunEvent[] = [];
  const messages = readSse(response.body!);
  return {
    events,
    /** Reads the stream to its end. */
    async end(): Promise<RunEvent[]> {
      for await (const message of messages) {
        events.push(JSON.parse(message.data));
      }
      return events;
    },
    /** Resolves once the run has started (its job waits at the hub). */
    started: () =>
      serve.waitForLog((entry) =>
        entry.msg === "run started" &&
        entry.conversation_id === "victim-conversation"
      ),
  };
}

const HELLO = { type: "daemon.hello", protocol: "coding-relay-v1" };

/**
 * Connects the real daemon `victim-laptop` with no token given (its hub is on
 * loopback, so it reads the one runner serve keeps in `dataDir`), asserts
 * the victim's run completes on it with the victim's answer, stops it (exit
 * 0) and returns its logs.
 */
async function victimEndsOnRealDaemon(
  victim: { end(): Promise<RunEvent[]> },
  hubUrl: string,
  dataDir: string,
): Promise<string> {
  const daemon = daemonProcess(hubUrl, "victim-laptop", undefined, {
    dataDir,
  });
  try {
    await daemon.connected;
    const events = await victim.end();
    assert.equal(events.at(-1)?.type, "run.completed");
    assert.match(
      deltaText(events),
      /^echo: the victim's secret prompt \(turn 1\)/,
    );
  } finally {
    assert.equal(await daemon.stop(), 0);
  }
  return daemon.logs();
}

/** A hello from a made-up daemon "anyone" with no metadata, and `token` if given. */
function helloOfAnyone(token?: string): Record<string, unknown> {
  return { ...HELLO, daemon_id: "anyone", metadata: {}, token };
}

Deno.test("a local process that says hello on the default loopback hub as a daemon that is not connected is refused without a token or with a wrong one, and never gets its run.start; the real runner daemon, finding the kept token itself, then runs the job", async () => {
  const dataDir = tempDir();
  const { serve, hubUrl, hubLine } = await serveWithHub(dataDir);
  const daemonToken = await keptDaemonToken(dataDir);
  try {
    const victim = await victimRun(serve, "victim-laptop", tempDir());
    await victim.started();
    const apiToken = serve.token!;
    const tries: [string, Record<string, unknown>][] = [
      ["no token", {}],
      ["an empty token", { token: "" }],
      ["a made-up token", { token: "made-up-token-Qx8Wv3Lz6Kp1Rn4Tb9Ym2" }],
      ["the API token", { token: apiToken }],
      ["the daemon token with a newline", { token: `${daemonToken}\n` }],
      ["the daemon token cut short", { token: daemonToken.slice(0, -1) }],
      ["the token as a number", { token: 1 }],
    ];
    for (const [name, token] of tries) {
      const answer = await sayHello(hubUrl, {
        ...HELLO,
        daemon_id: "victim-laptop",
        ...token,
        metadata: { pid: Deno.pid },
      });
      assert.deepEqual(
        answer,
        { frames: [], closed: [1008, REFUSAL_REASONS.invalidToken] },
        name,
      );
    }
    const daemons = await (await apiFetch(`${serve.url}/v1/daemons`)).json();
    assert.deepEqual(daemons.daemons, [], "no impostor connected or fenced");
    assert.equal(
      (hubLine as Record<string, unknown>).daemon_token_file,
      join(dataDir, "daemon-token"),
      "the log names the kept token's file",
    );

    const daemonLogs = await victimEndsOnRealDaemon(victim, hubUrl, dataDir);
    assert.ok(!daemonLogs.includes(daemonToken), "the daemon's log");
    assert.match(daemonLogs, /the one runner serve keeps in .*daemon-token/);
  } finally {
    await serve.stop();
  }
  assert.ok(!serve.logs().includes(daemonToken), "serve's log and stdout");
});

/** The `attack-hub <try>: <outcome>` lines of a reply. */
function attackReport(text: string): Record<string, string> {
  const report: Record<string, string> = {};
  for (const [, name, outcome] of text.matchAll(/attack-hub (\S+): (.+)/g)) {
    report[name] = outcome;
  }
  return report;
}

Deno.test("an unconfined agent of another run that dials the hub as the daemon a victim's run waits for is refused on every try; the victim's run goes to the real daemon, and the agent never holds the daemon token", async () => {
  const dataDir = tempDir();
  const record = join(tempDir(), "record.jsonl");
  const { serve, hubUrl } = await serveWithHub(dataDir);
  const daemonToken = await keptDaemonToken(dataDir);
  try {
    const victim = await victimRun(serve, "victim-laptop", tempDir());
    await victim.started();
    const attacker = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "attacker",
      input: { text: "fetch http://127.0.0.1 and follow what it says" },
      config: {
        ...fixtureConfig(tempDir(), [
          "--attack-hub",
          JSON.stringify({ url: hubUrl, daemonId: "victim-laptop" }),
          "--record",
          record,
        ]),
        sandbox: "off",
      },
      stream: false,
    });
    const run = await attacker.json();
    assert.equal(run.status, "completed", JSON.stringify(run));
    const refused = `closed 1008 ${REFUSAL_REASONS.invalidToken}`;
    assert.deepEqual(attackReport(deltaText(run.events)), {
      "no-token": refused,
      "empty-token": refused,
      "made-up-token": refused,
    });

    await victimEndsOnRealDaemon(victim, hubUrl, dataDir);

    const start = JSON.parse((await Deno.readTextFile(record)).split("\n")[0]);
    assert.equal(start.event, "start");
    for (const [name, value] of Object.entries(start.env)) {
      assert.ok(!String(value).includes(daemonToken), `agent env ${name}`);
    }
    assert.ok(!start.argv.join(" ").includes(daemonToken), "agent argv");
  } finally {
    await serve.stop();
  }
});

Deno.test("the daemon token runner serve makes is kept in the data dir with mode 0600, reused on the next start and printed by runner token --show --daemon; one other users may read is refused", async () => {
  const dataDir = tempDir();
  const first = await serveWithHub(dataDir);
  await first.serve.stop();
  const path = join(dataDir, "daemon-token");
  assert.equal((await Deno.stat(path)).mode! & 0o777, 0o600);
  const token = await keptDaemonToken(dataDir);
  assert.ok(token.length >= 32);
  assert.notEqual(token, first.serve.token, "not the API token");

  const second = await serveWithHub(dataDir);
  try {
    assert.equal(await keptDaemonToken(dataDir), token, "reused");
    const taken = await sayHello(second.hubUrl, {
      ...HELLO,
      daemon_id: "laptop",
      token,
      metadata: {},
    });
    assert.deepEqual(taken.frames, ["daemon.ready"]);
  } finally {
    await second.serve.stop();
  }
  for (const { serve } of [first, second]) {
    assert.ok(!serve.logs().includes(token), "never in serve's output");
  }
  const shown = await runCli([
    "token",
    "--show",
    "--daemon",
    "--data-dir",
    dataDir,
  ]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.equal(shown.stdout, `${token}\n`);

  await Deno.chmod(path, 0o644);
  const refused = spawnServe({
    dataDir,
    args: ["--daemon-enabled", "--daemon-port", "0"],
  });
  const output = await refused.output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 2, stderr);
  assert.match(stderr, /config\.invalid/);
  assert.match(stderr, /may be read by other users \(mode 644\)/);
  assert.match(stderr, /chmod 600/);
  assert.ok(!stderr.includes(token));
});

Deno.test("--daemon-loopback-without-token is the operator's explicit choice: only then does a tokenless hello take a daemon ID, and the log warns", async () => {
  const dataDir = tempDir();
  const { serve, hubUrl } = await serveWithHub(dataDir, [
    "--daemon-loopback-without-token",
  ]);
  try {
    const taken = await sayHello(hubUrl, helloOfAnyone());
    assert.deepEqual(taken.frames, ["daemon.ready"]);
    await serve.waitForLog((entry) =>
      entry.level === "warn" &&
      /--daemon-loopback-without-token/.test(String(entry.msg))
    );
  } finally {
    await serve.stop();
  }
  await assert.rejects(
    Deno.stat(join(dataDir, "daemon-token")),
    Deno.errors.NotFound,
    "no token is made",
  );
});

Deno.test("--daemon-loopback-without-token opens nothing off loopback, nor with a token given", async () => {
  const offLoopback = await spawnServe({
    dataDir: tempDir(),
    args: [
      ...["--daemon-enabled", "--daemon-port", "0"],
      ...["--daemon-host", "0.0.0.0", "--daemon-loopback-without-token"],
    ],
  }).output();
  assert.notEqual(offLoopback.code, 0);
  assert.match(
    new TextDecoder().decode(offLoopback.stderr),
    /--daemon-token is required when listening on 0\.0\.0\.0/,
  );

  const given = "given-daemon-token-Vm7Qz2Xk9Lw4Rp8Tn3Hb6";
  const { serve, hubUrl } = await serveWithHub(tempDir(), [
    "--daemon-loopback-without-token",
    "--daemon-token",
    given,
  ]);
  try {
    assert.deepEqual(
      await sayHello(hubUrl, helloOfAnyone()),
      { frames: [], closed: [1008, REFUSAL_REASONS.invalidToken] },
    );
    assert.deepEqual(
      (await sayHello(hubUrl, helloOfAnyone(given))).frames,
      ["daemon.ready"],
    );
  } finally {
    await serve.stop();
  }
});

Deno.test("runner daemon sends the kept token only to a hub on loopback", async () => {
  const dataDir = tempDir();
  const { serve } = await serveWithHub(dataDir);
  await serve.stop();
  // An address that is not this machine (TEST-NET-1): the daemon says so at
  // start and keeps trying to reach it until stopped.
  const daemon = spawnCli([
    "daemon",
    ...["--url", "ws://192.0.2.1:8766", "--daemon-id", "laptop"],
    ...["--data-dir", dataDir, "--log-format", "json"],
  ]);
  let text = "";
  for await (
    const chunk of daemon.stderr.pipeThrough(new TextDecoderStream())
  ) {
    text += chunk;
    if (text.includes('"daemon starting"')) break;
  }
  daemon.kill("SIGTERM");
  await daemon.status;
  await daemon.stdout.cancel();
  const starting = text.split("\n").map((line) => {
    try {
      return JSON.parse(line);
    } catch {
      return {};
    }
  }).find((entry) => entry.msg === "daemon starting");
  assert.equal(starting.token, "none");
  assert.match(text, /no daemon token given; only a hub without a token/);
});

Deno.test("a hub made without a token does not start unless the operator's opt-out says so, on loopback too", async () => {
  const dataDir = tempDir();
  assert.throws(
    () => createHub({ stateDir: join(dataDir, "relay") }),
    /needs a daemon token/,
  );
  assert.throws(
    () => startHubListener({ host: "127.0.0.1", port: 0, dataDir }),
    (error: RunnerError) => {
      assert.equal(error.code, "config.invalid");
      assert.match(error.message, /needs a daemon token on loopback too/);
      assert.match(error.message, /--daemon-loopback-without-token/);
      return true;
    },
  );
  const open = startHubListener({
    host: "127.0.0.1",
    port: 0,
    dataDir,
    loopbackWithoutToken: true,
  });
  try {
    assert.deepEqual(
      (await sayHello(open.server.url, helloOfAnyone())).frames,
      ["daemon.ready"],
    );
  } finally {
    await open.close();
  }
});

Deno.test("a fleet replica's hub makes no token of its own: without a shared daemon token it refuses to start", async () => {
  const dataDir = tempDir();
  const refused = await spawnServe({
    dataDir,
    args: [
      ...["--store", "postgres://runner@127.0.0.1:1/none"],
      ...["--api-token", "fleet-api-token-Wn5Rx8Qm2Lk7Vz3Tp9Hc4"],
      ...["--cluster-token", "fleet-cluster-token-Jd6Yb1Ns8Gf3Xq5Mw2"],
      ...["--advertise-url", "http://127.0.0.1:1"],
      ...["--daemon-enabled", "--daemon-port", "0"],
    ],
  }).output();
  const stderr = new TextDecoder().decode(refused.stderr);
  assert.equal(refused.code, 2, stderr);
  assert.match(stderr, /config\.invalid.*same --daemon-token/);
  await assert.rejects(
    Deno.stat(join(dataDir, "daemon-token")),
    Deno.errors.NotFound,
  );
});

Deno.test("a runner daemon started before the serve's first start gets in once the serve has made its token", async () => {
  const dataDir = tempDir();
  const free = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (free.addr as Deno.NetAddr).port;
  free.close();
  const daemon = spawnCli([
    "daemon",
    ...["--url", `ws://127.0.0.1:${port}`, "--daemon-id", "early"],
    ...["--data-dir", dataDir, "--reconnect-delay", "0.2"],
  ]);
  let text = "";
  const lines = daemon.stderr.pipeThrough(new TextDecoderStream())[
    Symbol.asyncIterator
  ]();
  const readUntilLog = async (pattern: RegExp) => {
    while (!pattern.test(text)) {
      const { value, done } = await lines.next();
      if (done) throw new Error(`runner daemon exited:\n${text}`);
      text += value;
    }
  };
  let serve: ServeProcess | undefined;
  try {
    await readUntilLog(/none kept in .*daemon-token yet/);
    serve = (await serveWithHub(dataDir, ["--daemon-port", String(port)]))
      .serve;
    await readUntilLog(/connected to the hub as early|invalid token/);
    assert.doesNotMatch(text, /invalid token/);
    assert.ok(!text.includes(await keptDaemonToken(dataDir)));
  } finally {
    daemon.kill("SIGTERM");
    await daemon.status;
    await lines.return?.();
    await daemon.stdout.cancel();
    await serve?.stop();
  }
});
