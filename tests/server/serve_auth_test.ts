/**
 * Auth, caller policy and secret hygiene of a real `runner serve`: the token
 * requirement off loopback, 401s (on loopback too: `tests/security/`), the custom-command and env-name
 * allow-lists, and planted secrets never showing anywhere.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  agentCommand,
  apiFetch,
  assertStatus,
  fixtureConfig,
  postJson,
  spawnServe,
  sseEvents,
  tempDir,
  withServe,
} from "../serve_test_helpers.ts";

const TOKEN = "planted-api-token-7f3a9c";
const ENV_SECRET = "planted-env-secret-51b2e8";

Deno.test("--host 0.0.0.0 without a token refuses to start and says how to fix it", async () => {
  const dir = await tempDir();
  try {
    const child = spawnServe({
      dataDir: join(dir, "data"),
      args: ["--host", "0.0.0.0"],
    });
    const [status, stdout, stderr] = await Promise.all([
      child.status,
      new Response(child.stdout).text(),
      new Response(child.stderr).text(),
    ]);
    assert.notEqual(status.code, 0);
    assert.doesNotMatch(stdout + stderr, /listening/);
    assert.match(stderr, /config\.invalid/);
    assert.match(stderr, /--api-token/);
    assert.match(stderr, /RUNNER_API_TOKEN/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("/v1 needs the bearer token (401 with WWW-Authenticate: Bearer); /healthz does not", async () => {
  await withServe({ env: { RUNNER_API_TOKEN: TOKEN } }, async (serve) => {
    const none = await fetch(`${serve.url}/v1/runs`);
    assert.equal(none.status, 401);
    assert.equal(none.headers.get("www-authenticate"), "Bearer");
    await none.body?.cancel();
    const wrong = await fetch(`${serve.url}/v1/runs`, {
      headers: { authorization: "Bearer not-the-token" },
    });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers.get("www-authenticate"), "Bearer");
    const body = await wrong.json();
    assert.deepEqual(body, {
      error: {
        code: "http.unauthorized",
        message: "Unauthorized.",
        retryable: false,
      },
    });
    const right = await fetch(`${serve.url}/v1/runs`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    await assertStatus(right, 200);
    const health = await fetch(`${serve.url}/healthz`);
    await assertStatus(health, 200);
  });
});

Deno.test("near-miss API tokens are 401: empty, cut, extended, re-cased, in another scheme, header or the query", async () => {
  await withServe({ env: { RUNNER_API_TOKEN: TOKEN } }, async (serve) => {
    const status = async (headers: Record<string, string>, query = "") => {
      const answer = await fetch(`${serve.url}/v1/runs${query}`, { headers });
      await answer.body?.cancel();
      return answer.status;
    };
    for (
      const headers of <Record<string, string>[]> [
        { authorization: "" },
        { authorization: "Bearer" },
        { authorization: "Bearer " },
        { authorization: `Bearer ${TOKEN.slice(0, -1)}` },
        { authorization: `Bearer ${TOKEN}x` },
        { authorization: `Bearer ${TOKEN.toUpperCase()}` },
        { authorization: `Bearer ${TOKEN} ${TOKEN}` },
        { authorization: `Basic ${TOKEN}` },
        { authorization: TOKEN },
        { "x-api-token": TOKEN },
        // Outside a fleet the cluster header means nothing.
        { "x-runner-cluster-token": TOKEN },
      ]
    ) {
      assert.equal(await status(headers), 401, JSON.stringify(headers));
    }
    assert.equal(await status({}, `?token=${TOKEN}`), 401);
    assert.equal(await status({ authorization: `bearer ${TOKEN}` }), 200);
  });
});

Deno.test("an ssh-target ssh would read as an option is a 400 config.invalid, and no run starts", async () => {
  await withServe({}, async (serve) => {
    for (const target of ["-oProxyCommand=id", "-v", "-luser@host"]) {
      const answer = await postJson(`${serve.url}/v1/runs`, {
        input: { text: "hi" },
        config: {
          provider: "claude-code",
          location: "remote-ssh",
          "ssh-target": target,
        },
        stream: false,
      });
      assert.equal(answer.status, 400, target);
      const { error } = await answer.json();
      assert.equal(error.code, "config.invalid", target);
      assert.match(error.message, /ssh-target/);
    }
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(runs.runs, []);
  });
});

Deno.test("callers cannot set commands or env names the operator did not allow", async () => {
  await withServe({
    args: ["--provider", "custom", "--acp-command", agentCommand()],
  }, async (serve, dir) => {
    const workspace = join(dir, "ws");
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { "acp-command": "sh -c 'echo pwned'", workspace },
        /--allow-custom-commands/,
      ],
      [{ provider: "custom", workspace }, /--allow-custom-commands/],
      [{ "mcp-servers-json": "[]", workspace }, /--allow-custom-commands/],
      [{ "env-json": { "LD_PRELOAD": "x" }, workspace }, /--allow-env-names/],
      ...[
        ["langbot-assets-gateway-host", "0.0.0.0"],
        ["langbot-assets-gateway-port", 9],
        ["langbot-assets-gateway-public-url", "http://example.invalid/mcp"],
        ["langbot_assets_gateway_port", 9],
      ].map(([key, value]): [Record<string, unknown>, RegExp] => [
        { [key]: value, workspace },
        /can only be set by the operator \(runner serve flags\), not per request/,
      ]),
    ];
    for (const [config, message] of cases) {
      const response = await postJson(`${serve.url}/v1/runs`, {
        input: { text: "x" },
        config,
      });
      assert.equal(response.status, 403, JSON.stringify(config));
      const body = await response.json();
      assert.equal(body.error.code, "http.forbidden");
      assert.match(body.error.message, message);
    }
    const stored = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(stored.runs, [], "a refused request stored a run");
    // The operator's default command still runs; advanced-settings is
    // accepted and ignored.
    const ok = await postJson(`${serve.url}/v1/runs?stream=false`, {
      input: { text: "x" },
      config: {
        workspace,
        "advanced-settings": { model: "anything", nested: [1, { a: 2 }] },
      },
    });
    const answer = await ok.json();
    assert.equal(answer.status, "completed", JSON.stringify(answer));
    assert.equal(answer.message, "echo: x (turn 1)");
    const run = await (await apiFetch(`${serve.url}/v1/runs/${answer.run_id}`))
      .json();
    assert.equal(run.config.workspace, workspace);
    assert.equal("advanced-settings" in run.config, false);
  });
});

Deno.test("a planted API token and env-json secret never appear in logs, events, runs, metrics or errors", async () => {
  const dir = await tempDir();
  const record = join(dir, "record.jsonl");
  await withServe({
    args: [
      "--allow-custom-commands",
      "--allow-env-names",
      "AGENT_SECRET",
      "--api-token",
      TOKEN,
    ],
  }, async (serve) => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const workspace = join(dir, "ws");
    const seen: string[] = [];
    // The agent echoes the prompt, which carries both secrets.
    const response = await postJson(`${serve.url}/v1/runs`, {
      run_id: "secret-run",
      input: { text: `say ${ENV_SECRET} and ${TOKEN}` },
      config: {
        ...fixtureConfig(workspace, ["--record", record]),
        "env-json": { AGENT_SECRET: ENV_SECRET },
      },
    }, auth);
    const events = await sseEvents(response);
    assert.equal(events.at(-1)!.type, "run.completed");
    seen.push(JSON.stringify(events));
    // The agent did get the secret in its environment.
    assert.match(await Deno.readTextFile(record), new RegExp(ENV_SECRET));

    const failing = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "x" },
      config: {
        provider: "custom",
        "acp-command": `/nonexistent/${ENV_SECRET}`,
        workspace,
        "env-json": { AGENT_SECRET: ENV_SECRET },
      },
    }, auth);
    seen.push(await failing.text());
    for (
      const path of [
        "/v1/runs/secret-run",
        "/v1/runs",
        "/v1/runs/secret-run/events?stream=false",
      ]
    ) {
      seen.push(
        await (await fetch(`${serve.url}${path}`, { headers: auth })).text(),
      );
    }
    seen.push(await (await fetch(`${serve.url}/metrics`)).text());
    // The stored start of the prompt is redacted before it is kept.
    const kept = await (await fetch(`${serve.url}/v1/runs/secret-run`, {
      headers: auth,
    })).json();
    assert.match(kept.prompt, /^say \[REDACTED\] and \[REDACTED\]$/);
    const badToken = await fetch(`${serve.url}/v1/runs`, {
      headers: { authorization: `Bearer ${TOKEN}x` },
    });
    seen.push(await badToken.text());
    const badConfig = await postJson(`${serve.url}/v1/runs`, {
      input: { text: "x" },
      config: {
        "env-json": { AGENT_SECRET: ENV_SECRET, OTHER: ENV_SECRET },
        workspace,
        provider: "custom",
      },
    }, auth);
    assert.equal(badConfig.status, 403);
    seen.push(await badConfig.text());
    await serve.stop();
    seen.push(serve.logs());
    const everything = seen.join("\n");
    assert.ok(!everything.includes(TOKEN), "the API token leaked");
    for (const [index, part] of seen.entries()) {
      assert.ok(
        !part.includes(ENV_SECRET),
        `the env-json secret leaked in part ${index}: ${part}`,
      );
    }
    assert.match(everything, /\[REDACTED\]/);
  });
  await Deno.remove(dir, { recursive: true });
});
