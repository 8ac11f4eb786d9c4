/**
 * `/acp` on a real `runner serve` with the fixture agent, driven by the ACP
 * SDK's own client over both profiles (Streamable HTTP and WebSocket): what
 * an editor sees of initialize, a streamed prompt, cancel, permissions asked
 * back, load after a reconnect and a restart, set_mode, and the floors and
 * the token holding.
 *
 * @module
 */

import assert from "node:assert/strict";
import * as acp from "@agentclientprotocol/sdk";
import {
  type AcpProfile,
  type AcpTestClient,
  agentText,
  assertOnlyRun,
  initialize,
  isReplayed,
  newSession,
  openAcpClient,
  PROFILES,
  promptText,
} from "../acp_client_helpers.ts";
import {
  apiFetch,
  fixtureTargetArgs,
  type ServeProcess,
  startServe,
  tempDir,
} from "../serve_test_helpers.ts";

/** `runner serve` whose operator target is the fixture agent with `flags`. */
async function serveFixture(
  flags: string[],
  extraArgs: string[] = [],
  dataDir?: string,
): Promise<{ serve: ServeProcess; dataDir: string; workspace: string }> {
  const dir = dataDir ?? await tempDir();
  const workspace = await Deno.makeTempDir({ dir, prefix: "ws-" });
  const serve = await startServe({
    dataDir: dir,
    args: [...fixtureTargetArgs(workspace, flags), ...extraArgs],
  });
  return { serve, dataDir: dir, workspace };
}

function client(
  serve: ServeProcess,
  profile: AcpProfile,
  extra: Partial<Parameters<typeof openAcpClient>[0]> = {},
): AcpTestClient {
  return openAcpClient({
    url: serve.url,
    token: serve.token,
    profile,
    ...extra,
  });
}

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: initialize tells the target's capabilities; a prompt streams and is a run`, async () => {
    const { serve } = await serveFixture([
      "--chunks",
      "3",
      "--image",
      "--load-session",
    ]);
    const editor = client(serve, profile);
    try {
      const init = await initialize(editor);
      assert.equal(init.protocolVersion, 1);
      assert.equal(init.agentCapabilities?.loadSession, true);
      assert.equal(init.agentCapabilities?.promptCapabilities?.image, true);
      assert.deepEqual(init.authMethods, []);
      const runnerMeta = init._meta?.runner as Record<string, unknown>;
      assert.equal(runnerMeta.capabilities_from, "probe");

      const sessionId = await newSession(editor);
      const answer = await promptText(editor, sessionId, "hello there");
      assert.equal(answer.stopReason, "end_turn");
      const chunks = editor.updates.filter((n) =>
        n.sessionId === sessionId &&
        n.update.sessionUpdate === "agent_message_chunk"
      );
      assert.ok(
        chunks.length >= 1 && chunks.length <= 3,
        "the agent's chunks passed on, those that waited together joined",
      );
      assert.equal(
        agentText(editor.updates, sessionId),
        "echo: hello there (turn 1)",
      );

      await assertOnlyRun(serve.url, sessionId, answer);
    } finally {
      editor.close();
      await serve.stop();
    }
  });
}

/** The `data` of a JSON-RPC error the client got. */
async function refusal(
  call: Promise<unknown>,
): Promise<{ code: number; data: Record<string, unknown> }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof acp.RequestError) {
      return {
        code: error.code,
        data: error.data as Record<string, unknown>,
      };
    }
    throw error;
  }
  throw new Error("the call was not refused");
}

Deno.test("acp: a wrong token is refused on both profiles and starts nothing", async () => {
  const { serve } = await serveFixture([]);
  try {
    for (const profile of PROFILES) {
      const editor = openAcpClient({
        url: serve.url,
        token: "not-the-token",
        profile,
      });
      await assert.rejects(initialize(editor));
      editor.close();
    }
    const missing = openAcpClient({ url: serve.url, profile: "http" });
    await assert.rejects(initialize(missing));
    missing.close();
    const raw = await fetch(`${serve.url}/acp`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: 1 },
      }),
    });
    assert.equal(raw.status, 401);
    assert.equal((await raw.json()).error.code, "http.unauthorized");
    const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
    assert.deepEqual(runs.runs, []);
  } finally {
    await serve.stop();
  }
});

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: keys that would widen the operator's floor are refused`, async () => {
    const { serve } = await serveFixture([]);
    const widening = client(serve, profile, {
      query: { "acp-command": "/bin/sh -c id" },
    });
    const editor = client(serve, profile);
    try {
      const command = await refusal(initialize(widening));
      assert.equal(command.code, -32602);
      assert.equal(command.data.code, "http.forbidden");

      await initialize(editor);
      const fsWrite = await refusal(newSession(editor, {
        meta: { runner: { config: { "fs-write": true } } },
      }));
      assert.equal(fsWrite.code, -32602);
      assert.equal(fsWrite.data.code, "http.forbidden");
      assert.equal(fsWrite.data.key, "fs-write");
      const runs = await (await apiFetch(`${serve.url}/v1/runs`)).json();
      assert.deepEqual(runs.runs, []);
    } finally {
      widening.close();
      editor.close();
      await serve.stop();
    }
  });
}

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: permission requests left to a person are asked back and answered both ways`, async () => {
    const { serve } = await serveFixture(
      ["--permission", "--permission-options", "allow_once,reject_once"],
      ["--permission-decision", "ask"],
    );
    let answer = "allow_once";
    const editor = client(serve, profile, {
      onPermission: () =>
        Promise.resolve({ outcome: { outcome: "selected", optionId: answer } }),
    });
    try {
      await initialize(editor);
      const sessionId = await newSession(editor);
      await promptText(editor, sessionId, "write it");
      assert.equal(editor.permissions.length, 1);
      assert.equal(editor.permissions[0].sessionId, sessionId);
      assert.deepEqual(
        editor.permissions[0].options.map((option) => option.optionId),
        ["allow_once", "reject_once"],
      );
      assert.match(
        agentText(editor.updates, sessionId),
        /^permission: allow_once\n/,
      );

      answer = "reject_once";
      const second = await newSession(editor);
      await promptText(editor, second, "write it");
      assert.equal(editor.permissions.length, 2);
      assert.match(
        agentText(editor.updates, second),
        /^permission: reject_once\n/,
      );
    } finally {
      editor.close();
      await serve.stop();
    }
  });
}

Deno.test("acp: a client that answers nothing meets permission-timeout", async () => {
  const { serve } = await serveFixture(
    ["--permission", "--permission-options", "allow_once,reject_once"],
    ["--permission-decision", "ask", "--permission-timeout", "1"],
  );
  const editor = client(serve, "http");
  try {
    await initialize(editor);
    const sessionId = await newSession(editor);
    const answer = await promptText(editor, sessionId, "write it");
    assert.equal(editor.permissions.length, 1);
    assert.equal(answer.stopReason, "end_turn");
    assert.match(
      agentText(editor.updates, sessionId),
      /^permission: reject_once\n/,
    );
    const runId = (answer._meta?.runner as { run_id: string }).run_id;
    const run = await (await apiFetch(`${serve.url}/v1/runs/${runId}`)).json();
    const decided = run.events.find((event: { type: string }) =>
      event.type === "permission.decided"
    );
    assert.equal(decided.data.decided_by ?? decided.data.by, "timeout");
  } finally {
    editor.close();
    await serve.stop();
  }
});

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: session/cancel mid-turn cancels the run`, async () => {
    const { serve } = await serveFixture(
      ["--permission", "--permission-options", "allow_once,reject_once"],
      ["--permission-decision", "ask"],
    );
    let sessionId = "";
    const editor = client(serve, profile, {
      // The turn is under way (waiting on this question): cancel it.
      onPermission: () => {
        editor.agent.notify("session/cancel", { sessionId });
        return new Promise(() => {});
      },
    });
    try {
      await initialize(editor);
      sessionId = await newSession(editor);
      const answer = await promptText(editor, sessionId, "write it");
      assert.equal(answer.stopReason, "cancelled");
      const runId = (answer._meta?.runner as { run_id: string }).run_id;
      const run = await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
        .json();
      assert.equal(run.status, "cancelled");
    } finally {
      editor.close();
      await serve.stop();
    }
  });
}

/** Prompts once on a fresh connection; returns the session id. */
async function firstConversation(
  serve: ServeProcess,
  profile: AcpProfile,
): Promise<string> {
  const editor = client(serve, profile);
  try {
    await initialize(editor);
    const sessionId = await newSession(editor);
    await promptText(editor, sessionId, "remember me");
    return sessionId;
  } finally {
    editor.close();
  }
}

/** Loads `sessionId` on a new connection and prompts again. */
async function loadAndContinue(
  serve: ServeProcess,
  profile: AcpProfile,
  sessionId: string,
): Promise<AcpTestClient> {
  const editor = client(serve, profile);
  await initialize(editor);
  await editor.agent.request("session/load", {
    sessionId,
    cwd: "/somewhere/on/the/editor",
    mcpServers: [],
  });
  // Over Streamable HTTP the load's answer and the session's updates travel
  // on different streams: the last replayed update may follow the answer.
  while (editor.updates.filter(isReplayed).length < 2) await editor.next();
  const replayed = editor.updates.filter(isReplayed);
  assert.deepEqual(
    replayed.map((n) => n.update.sessionUpdate),
    ["user_message_chunk", "agent_message_chunk"],
    "the stored transcript, marked replayed",
  );
  assert.equal(
    agentText(editor.updates, sessionId, { replayed: true }),
    "echo: remember me (turn 1)",
  );
  await promptText(editor, sessionId, "again");
  return editor;
}

const RECOVERABLE = ["--load-session"];

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: session/load after a client reconnect replays and continues the agent's session`, async () => {
    const dir = await tempDir();
    const stateDir = await Deno.makeTempDir({ dir, prefix: "agent-state-" });
    const { serve } = await serveFixture(
      [...RECOVERABLE, "--state-dir", stateDir],
      [],
      dir,
    );
    try {
      const sessionId = await firstConversation(serve, profile);
      const editor = await loadAndContinue(serve, profile, sessionId);
      assert.equal(
        agentText(editor.updates, sessionId),
        "echo: again (turn 2)",
      );
      editor.close();
      const listed = await (await apiFetch(
        `${serve.url}/v1/runs?conversation_id=${sessionId}`,
      )).json();
      assert.equal(listed.runs.length, 2);
    } finally {
      await serve.stop();
    }
  });
}

Deno.test("acp: session/load after a runner restart replays the store and the agent loads its session", async () => {
  const dir = await tempDir();
  const stateDir = await Deno.makeTempDir({ dir, prefix: "agent-state-" });
  const flags = [...RECOVERABLE, "--state-dir", stateDir];
  const first = await serveFixture(flags, [], dir);
  let sessionId: string;
  try {
    sessionId = await firstConversation(first.serve, "websocket");
  } finally {
    await first.serve.stop();
  }
  const restarted = await startServe({
    dataDir: dir,
    args: fixtureTargetArgs(first.workspace, flags),
  });
  try {
    const editor = await loadAndContinue(restarted, "http", sessionId);
    assert.equal(agentText(editor.updates, sessionId), "echo: again (turn 2)");
    const listed = await editor.agent.request("session/list", {});
    assert.ok(
      listed.sessions.some((session) => session.sessionId === sessionId),
    );
    editor.close();
  } finally {
    await restarted.stop();
  }
});

Deno.test("acp: session/load of an unknown session is -32002", async () => {
  const { serve } = await serveFixture([]);
  const editor = client(serve, "websocket");
  try {
    await initialize(editor);
    const missing = await refusal(editor.agent.request("session/load", {
      sessionId: "acp-nothing-here",
      cwd: "/",
      mcpServers: [],
    }));
    assert.equal(missing.code, -32002);
  } finally {
    editor.close();
    await serve.stop();
  }
});

for (const profile of PROFILES) {
  Deno.test(`acp ${profile}: set_mode takes a mode the operator lists and refuses another`, async () => {
    const { serve } = await serveFixture(
      ["--session-config", "modes"],
      ["--caller-modes", "default,plan"],
    );
    const editor = client(serve, profile);
    try {
      await initialize(editor);
      const sessionId = await newSession(editor);
      await editor.agent.request("session/set_mode", {
        sessionId,
        modeId: "plan",
      });
      const refused = await refusal(
        editor.agent.request("session/set_mode", {
          sessionId,
          modeId: "acceptEdits",
        }),
      );
      assert.equal(refused.code, -32602);
      assert.equal(refused.data.code, "http.forbidden");
      await promptText(editor, sessionId, "plan it");
      assert.match(agentText(editor.updates, sessionId), /^config: mode=plan /);
    } finally {
      editor.close();
      await serve.stop();
    }
  });
}

Deno.test("acp: the operator's secrets are redacted from the updates passed on", async () => {
  const secret = "acp-secret-value-8d1f2e";
  const { serve } = await serveFixture(
    ["--text", `the key is ${secret}`],
    ["--env-json", JSON.stringify({ SERVICE_API_KEY: secret })],
  );
  const editor = client(serve, "websocket");
  try {
    await initialize(editor);
    const sessionId = await newSession(editor);
    await promptText(editor, sessionId, "tell me");
    const text = agentText(editor.updates, sessionId);
    assert.match(text, /^the key is /);
    assert.ok(!JSON.stringify(editor.updates).includes(secret));
  } finally {
    editor.close();
    await serve.stop();
  }
});
