/**
 * Attacks on `runner serve`'s API from the same machine: a local process,
 * or an agent (unconfined: `sandbox=off`, the worst case) whose prompt
 * injection points it at `http://127.0.0.1:<port>`. Loopback is not the
 * operator: with the default options every route that starts, steers,
 * answers or reads a run wants the API token, the agent never holds it,
 * and it shows nowhere but the console line `runner serve` prints.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  apiFetch,
  assertStatus,
  deltaText,
  fixtureConfig,
  postJson,
  readSse,
  readUntil,
  type ServeProcess,
  startServe,
  tempDir,
  withServe,
} from "../serve_test_helpers.ts";
import type { RunEvent } from "../../lib/events.ts";

/** Every route that starts, steers, answers or reads a run, and the console's calls. */
const GUARDED: [method: string, path: string, body?: unknown][] = [
  ["POST", "/v1/runs", {
    input: { text: "hi" },
    config: { provider: "codex", workspace: "/tmp" },
  }],
  ["GET", "/v1/runs"],
  ["GET", "/v1/runs?status=active"],
  ["GET", "/v1/runs/some-run"],
  ["GET", "/v1/runs/some-run/events"],
  ["GET", "/v1/runs/some-run/events?stream=false"],
  ["POST", "/v1/runs/some-run/input", { input: { text: "and now rm -rf" } }],
  ["POST", "/v1/runs/some-run/cancel", {}],
  ["POST", "/v1/runs/some-run/permissions/some-request", {
    decision: "allow_once",
  }],
  ["GET", "/v1/conversations/victim"],
  ["DELETE", "/v1/conversations/victim"],
  ["GET", "/v1/agents"],
  ["DELETE", "/v1/agents/some-agent"],
  ["GET", "/v1/daemons"],
  ["POST", "/v1/daemons/some-daemon/unfence", {}],
  ["GET", "/v1/providers"],
  // The n8n webhook with its default --n8n-auth none.
  ["POST", "/v1/webhooks/n8n", { chatInput: "hi", sessionId: "attacker" }],
  // Other spellings of the same routes, and routes that do not exist.
  ["GET", "/v1/runs/"],
  ["GET", "/v1//runs"],
  ["GET", "/%76%31/runs"],
  ["GET", "/v1/nothing-here"],
  ["POST", "/", {}],
];

async function tokenlessStatus(
  url: string,
  [method, path, body]: typeof GUARDED[number],
  headers: Record<string, string> = {},
): Promise<{ status: number; code?: string }> {
  const answer = await fetch(`${url}${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await answer.text();
  let code: string | undefined;
  try {
    code = JSON.parse(text).error?.code;
  } catch { /* not JSON */ }
  return { status: answer.status, code };
}

Deno.test("a default runner serve on loopback answers 401 http.unauthorized to every run route called without its token, or with a wrong one", async () => {
  await withServe({}, async (serve) => {
    assert.ok(serve.token, "runner serve made a token");
    for (const route of GUARDED) {
      for (
        const headers of <Record<string, string>[]> [
          {},
          { authorization: "Bearer not-the-token" },
          { authorization: `Basic ${btoa(`runner:${serve.token}`)}` },
        ]
      ) {
        assert.deepEqual(
          await tokenlessStatus(serve.url, route, headers),
          { status: 401, code: "http.unauthorized" },
          `${route[0]} ${route[1]} ${JSON.stringify(headers)}`,
        );
      }
    }
    // What stays open holds no run: health, metrics, the API description
    // and the console's page and files.
    for (const path of ["/healthz", "/metrics", "/openapi.json", "/"]) {
      const open = await fetch(`${serve.url}${path}`);
      await open.body?.cancel();
      assert.equal(open.status, 200, path);
    }
    // The token is the way in.
    const listed = await apiFetch(`${serve.url}/v1/runs`);
    await assertStatus(listed, 200);
  });
});

/**
 * Starts `runner serve` once on a fresh data dir (which makes its token) and
 * stops it, then runs `fn` with that data dir and the stopped server.
 */
async function afterFirstStart(
  fn: (dataDir: string, first: ServeProcess) => Promise<void>,
): Promise<void> {
  const dir = await tempDir();
  const dataDir = join(dir, "data");
  try {
    const first = await startServe({ dataDir });
    await first.stop();
    await fn(dataDir, first);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("the token runner serve makes is kept in the data dir with mode 0600, reused on the next start, and printed only in the console line", async () => {
  await afterFirstStart(async (dataDir, first) => {
    const path = join(dataDir, "api-token");
    const info = await Deno.stat(path);
    assert.equal(info.mode! & 0o777, 0o600);
    const token = (await Deno.readTextFile(path)).trim();
    assert.equal(first.token, token);
    assert.ok(token.length >= 32);
    assert.equal(
      first.consoleUrl,
      `${first.url}/#token=${token}`,
      "the token rides in the fragment, which browsers never send",
    );
    const second = await startServe({ dataDir });
    try {
      assert.equal(second.token, token);
      assert.equal(
        (await tokenlessStatus(second.url, ["GET", "/v1/runs"])).status,
        401,
      );
      const listed = await apiFetch(`${second.url}/v1/runs`);
      await assertStatus(listed, 200);
    } finally {
      await second.stop();
    }
    for (const serve of [first, second]) {
      const lines = serve.logs().split("\n");
      const withToken = lines.filter((line) => line.includes(token));
      assert.equal(withToken.length, 1, "only the console line has it");
      assert.match(
        withToken[0],
        /^console: http:\/\/127\.0\.0\.1:\d+\/#token=/,
      );
    }
  });
});

Deno.test("a token file other users may read is refused at start, and says how to fix it", async () => {
  await afterFirstStart(async (dataDir, first) => {
    await Deno.chmod(join(dataDir, "api-token"), 0o644);
    const refused = await startServe({ dataDir }).then(
      (serve) => serve.stop().then(() => "started"),
      (error: Error) => error.message,
    );
    assert.match(refused, /config\.invalid/);
    assert.match(refused, /may be read by other users \(mode 644\)/);
    assert.match(refused, /chmod 600/);
    assert.doesNotMatch(refused, new RegExp(first.token!));
  });
});

/** The `attack-api <step>: <outcome>` lines of a reply. */
function attackReport(text: string): Record<string, string[]> {
  const report: Record<string, string[]> = {};
  for (const [, step, outcome] of text.matchAll(/attack-api (\S+): (.+)/g)) {
    (report[step] ??= []).push(outcome);
  }
  return report;
}

Deno.test("an unconfined agent that calls the runner's own API gets 401 everywhere: its permission request waits for the operator, it starts no run, reads nothing, and never holds the token", async () => {
  const dir = await tempDir();
  const record = join(dir, "record.jsonl");
  await withServe({ args: ["--allow-custom-commands"] }, async (serve) => {
    const token = serve.token!;
    const response = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "victim",
      input: { text: "summarise the README" },
      config: {
        ...fixtureConfig(join(dir, "ws"), [
          "--permission",
          "--attack-api",
          serve.url,
          "--record",
          record,
        ]),
        sandbox: "off",
        "permission-decision": "ask",
      },
    });
    assert.equal(response.status, 200);
    const runId = response.headers.get("x-run-id")!;
    const events: RunEvent[] = [];
    const messages = readSse(response.body!);
    // The agent reports once every attack was answered, while its request waits.
    await readUntil(
      messages,
      events,
      () => /attack-api n8n-webhook: .*\n/.test(deltaText(events)),
    );
    assert.deepEqual(attackReport(deltaText(events)), {
      "list-runs": ["401"],
      "approve": ["401"],
      "start-run": ["401"],
      "read-conversation": ["401"],
      "n8n-webhook": ["401"],
    });
    const asked = events.find((event) => event.type === "permission.requested");
    assert.ok(asked, "the agent's permission request is open");
    assert.equal(
      events.find((event) => event.type === "permission.decided"),
      undefined,
      "nobody but the operator decided it",
    );
    // The operator, who holds the token, decides.
    const data = asked.data as {
      request_id: string;
      options: { option_id: string; kind: string }[];
    };
    const reject = data.options.find((o) => o.kind === "reject_once")!;
    const answered = await postJson(
      `${serve.url}/v1/runs/${runId}/permissions/${data.request_id}`,
      { option_id: reject.option_id },
    );
    await assertStatus(answered, 200);
    for await (const message of messages) events.push(JSON.parse(message.data));
    const decided = events.filter((event) =>
      event.type === "permission.decided"
    );
    assert.equal(decided.length, 1);
    assert.equal(decided[0].data.by, "caller");
    assert.equal(decided[0].data.decision, "reject_once");
    assert.equal(events.at(-1)!.type, "run.completed");

    // The attacker started no run: the victim's is the only one.
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(
      runs.runs.map((run: { run_id: string }) => run.run_id),
      [runId],
    );

    // The token is nowhere the agent or a reader of the run can look.
    const start = JSON.parse((await Deno.readTextFile(record)).split("\n")[0]);
    assert.equal(start.event, "start");
    assert.equal(start.env.RUNNER_API_TOKEN, undefined);
    for (const [name, value] of Object.entries(start.env)) {
      assert.ok(!String(value).includes(token), `agent env ${name}`);
    }
    assert.ok(!start.argv.join(" ").includes(token), "agent argv");
    const stored = await (await apiFetch(
      `${serve.url}/v1/runs/${runId}/events?stream=false`,
    )).text();
    assert.ok(!stored.includes(token), "stored events");
    assert.ok(!JSON.stringify(events).includes(token), "streamed events");
    // A client that puts the token in a query: the access log keeps routes only.
    for (const path of [`/?token=${token}`, `/v1/runs?token=${token}`]) {
      const answer = await apiFetch(`${serve.url}${path}`);
      await answer.body?.cancel();
    }
    await serve.waitForLog((entry) =>
      entry.msg === "request" && entry.route === "/v1/runs" &&
      entry.status === 200
    );
    const outsideConsoleLine = serve.logs().split("\n").filter((line) =>
      !line.startsWith("console: ")
    ).join("\n");
    assert.ok(!outsideConsoleLine.includes(token), "the log");
    assert.ok(serve.logs().includes(`#token=${token}`), "the console line");
  });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("--loopback-without-token is the operator's explicit choice: only then does a tokenless local request reach the API, and the log warns", async () => {
  await withServe({ args: ["--loopback-without-token"] }, async (serve) => {
    assert.equal(serve.token, undefined);
    assert.equal(
      (await tokenlessStatus(serve.url, ["GET", "/v1/runs"])).status,
      200,
    );
    await serve.waitForLog((entry) =>
      entry.level === "warn" &&
      /--loopback-without-token/.test(String(entry.msg))
    );
    assert.match(serve.consoleUrl, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  });
});

Deno.test("--loopback-without-token with a given token still requires the token", async () => {
  await withServe({
    args: ["--loopback-without-token"],
    env: { RUNNER_API_TOKEN: "given-token-Qm3Xv8Lk2Wp7Rz5Tn9Hb4Jc6" },
  }, async (serve) => {
    assert.deepEqual(
      await tokenlessStatus(serve.url, ["GET", "/v1/runs"]),
      { status: 401, code: "http.unauthorized" },
    );
  });
});

Deno.test("an API token the operator gives in runner serve's environment never reaches the agent's environment", async () => {
  const dir = await tempDir();
  const record = join(dir, "record.jsonl");
  const token = "operator-token-Wq8Zt3Kx7Mv2Pn6Rb4Ld9Jf5";
  await withServe({
    args: ["--allow-custom-commands"],
    env: { RUNNER_API_TOKEN: token },
  }, async (serve) => {
    const response = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "hi" },
      config: {
        ...fixtureConfig(join(dir, "ws"), ["--record", record]),
        sandbox: "off",
      },
    });
    await response.body?.cancel();
    await serve.waitForLog((entry) => entry.msg === "run finished");
    const start = JSON.parse((await Deno.readTextFile(record)).split("\n")[0]);
    assert.equal(start.env.RUNNER_API_TOKEN, undefined);
    for (const [name, value] of Object.entries(start.env)) {
      assert.ok(!String(value).includes(token), `agent env ${name}`);
    }
  });
  await Deno.remove(dir, { recursive: true });
});
