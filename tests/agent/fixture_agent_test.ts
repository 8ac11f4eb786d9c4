/**
 * End-to-end checks of the ACP fixture agent (`tests/fixtures/agent.ts`),
 * driven through the SDK's client side over a real child process.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import assert from "node:assert/strict";
import { tempDir } from "../helpers.ts";

const AGENT = new URL("../fixtures/agent.ts", import.meta.url).pathname;
const CONFIG = new URL("../../deno.json", import.meta.url).pathname;

interface Fixture {
  conn: acp.ClientConnection;
  agent: acp.ClientContext;
  updates: acp.SessionNotification[];
  /** Resolves once `pred(updates)` holds. */
  until(pred: (u: acp.SessionNotification[]) => boolean): Promise<void>;
  /** Agent-message text chunks received so far, in order. */
  chunks(): string[];
  stop(): Promise<{ status: Deno.CommandStatus; stderr: string }>;
}

/** Runs `body` with a fixture agent started with `flags` and `env`, stopped afterwards. */
async function withFixture<T>(
  flags: string[],
  body: (fixture: Fixture) => Promise<T>,
  env: Record<string, string> = {},
): Promise<T> {
  const fixture = start(flags, env);
  try {
    return await body(fixture);
  } finally {
    await fixture.stop();
  }
}

function start(
  flags: string[],
  env: Record<string, string> = {},
): Fixture {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--config", CONFIG, AGENT, ...flags],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    env,
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const updates: acp.SessionNotification[] = [];
  let waiters: Array<() => void> = [];
  const conn = acp.client({ name: "t" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
      const ws = waiters;
      waiters = [];
      ws.forEach((w) => w());
    })
    .onRequest(
      acp.methods.client.session.requestPermission,
      ({ params }) => ({
        outcome: { outcome: "selected", optionId: params.options[0].optionId },
      }),
    )
    .connect(acp.ndJsonStream(child.stdin, child.stdout));
  const until = async (pred: (u: acp.SessionNotification[]) => boolean) => {
    while (!pred(updates)) {
      await new Promise<void>((resolve) => waiters.push(resolve));
    }
  };
  const chunks = () =>
    updates.flatMap((n) =>
      n.update.sessionUpdate === "agent_message_chunk" &&
        n.update.content.type === "text"
        ? [n.update.content.text]
        : []
    );
  const stop = async () => {
    try {
      await child.stdin.close();
    } catch { /* already gone */ }
    try {
      child.kill("SIGKILL");
    } catch { /* already exited */ }
    const status = await child.status;
    conn.close();
    await conn.closed;
    return { status, stderr: await stderr };
  };
  return { conn, agent: conn.agent, updates, until, chunks, stop };
}

async function init(f: Fixture): Promise<acp.InitializeResponse> {
  return await f.agent.request(acp.methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: {},
  });
}

async function newSession(f: Fixture, cwd = "/tmp"): Promise<string> {
  const res = await f.agent.request(acp.methods.agent.session.new, {
    cwd,
    mcpServers: [],
  });
  return res.sessionId;
}

async function promptText(f: Fixture, sessionId: string, text: string) {
  return await f.agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text }],
  });
}

Deno.test("chunks arrive in order and the turn ends with end_turn", async () => {
  await withFixture(["--text", "abcdefghij", "--chunks", "4"], async (f) => {
    const initRes = await init(f);
    assert.equal(initRes.protocolVersion, 1);
    assert.deepEqual(initRes.agentInfo, {
      name: "fixture-agent",
      version: "1.0.0",
    });
    const sid = await newSession(f);
    const res = await promptText(f, sid, "hello");
    assert.equal(res.stopReason, "end_turn");
    await f.until(() => f.chunks().length >= 4);
    assert.deepEqual(f.chunks(), ["abc", "def", "gh", "ij"]);
  });
});

Deno.test("--protocol-version 2 is answered", async () => {
  await withFixture(
    ["--protocol-version", "2", "--resume", "--image"],
    async (f) => {
      const res = await init(f);
      assert.equal(res.protocolVersion, 2);
      assert.deepEqual(res.agentCapabilities?.sessionCapabilities?.resume, {});
      assert.equal(res.agentCapabilities?.promptCapabilities?.image, true);
      assert.equal(res.agentCapabilities?.loadSession, false);
    },
  );
});

Deno.test("--auth-required rejects session/new with -32000", async () => {
  await withFixture(["--auth-required"], async (f) => {
    const res = await init(f);
    assert.equal(res.authMethods?.[0]?.id, "fixture-login");
    await assert.rejects(newSession(f), (e: unknown) => {
      assert.ok(e instanceof acp.RequestError);
      assert.equal(e.code, -32000);
      assert.equal(e.message, "Authentication required");
      return true;
    });
  });
});

Deno.test("session/load replays history across processes", async () => {
  const dir = tempDir();
  const sid = await withFixture(["--state-dir", dir], async (a) => {
    await init(a);
    const sid = await newSession(a, "/work");
    await promptText(a, sid, "first");
    await a.until(() => a.chunks().length >= 1);
    assert.equal(a.chunks().join(""), "echo: first (turn 1)");
    return sid;
  });

  await withFixture(["--state-dir", dir, "--load-session"], async (b) => {
    const res = await init(b);
    assert.equal(res.agentCapabilities?.loadSession, true);
    await b.agent.request(acp.methods.agent.session.load, {
      sessionId: sid,
      cwd: "/work",
      mcpServers: [],
    });
    await b.until((u) => u.length >= 2);
    assert.deepEqual(
      b.updates.map((n) => [n.update.sessionUpdate, textOf(n)]),
      [
        ["user_message_chunk", "first"],
        ["agent_message_chunk", "echo: first (turn 1)"],
      ],
    );
    await promptText(b, sid, "second");
    await b.until((u) => u.length >= 3);
    assert.equal(textOf(b.updates[2]), "echo: second (turn 2)");

    await assert.rejects(
      b.agent.request(acp.methods.agent.session.load, {
        sessionId: "no-such-session",
        cwd: "/work",
        mcpServers: [],
      }),
      (e: unknown) => {
        assert.ok(e instanceof acp.RequestError);
        assert.equal(e.code, -32002);
        assert.deepEqual(e.data, { sessionId: "no-such-session" });
        return true;
      },
    );
  });
});

Deno.test("session/resume works across processes without replay", async () => {
  const dir = tempDir();
  const sid = await withFixture(["--state-dir", dir], async (a) => {
    await init(a);
    const sid = await newSession(a);
    await promptText(a, sid, "one");
    return sid;
  });

  await withFixture(["--state-dir", dir, "--resume"], async (b) => {
    await init(b);
    await b.agent.request(acp.methods.agent.session.resume, {
      sessionId: sid,
      cwd: "/tmp",
      mcpServers: [],
    });
    const res = await promptText(b, sid, "two");
    assert.equal(res.stopReason, "end_turn");
    await b.until(() => b.chunks().length >= 1);
    assert.deepEqual(
      b.updates.map((n) => [n.update.sessionUpdate, textOf(n)]),
      [["agent_message_chunk", "echo: two (turn 2)"]],
    );
  });
});

Deno.test("--record captures prompt blocks, env and cancel", async () => {
  const dir = tempDir();
  const record = `${dir}/record.jsonl`;
  await withFixture(["--record", record, "--stall-prompt"], async (f) => {
    await init(f);
    const sid = await newSession(f);
    const blocks: acp.ContentBlock[] = [
      { type: "text", text: "look at this" },
      { type: "resource_link", uri: "file:///tmp/a.txt", name: "a.txt" },
    ];
    const pending = f.agent.request(acp.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: blocks,
    });
    await f.until(() => f.chunks().length >= 1);
    assert.equal(f.chunks()[0], "echo: look at this (turn 1)");
    await f.agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    assert.equal((await pending).stopReason, "cancelled");

    const lines = (await Deno.readTextFile(record)).trim().split("\n")
      .map((l) => JSON.parse(l));
    assert.equal(lines[0].event, "start");
    assert.equal(lines[0].env.FIXTURE_PROBE, "probe-1");
    const prompt = lines.find((l) => l.method === "session/prompt");
    assert.deepEqual(prompt.params.prompt, blocks);
    assert.ok(lines.some((l) => l.method === "session/cancel"));
  }, { FIXTURE_PROBE: "probe-1" });
});

Deno.test("--permission and --gate-fifo hold and shape the turn", async () => {
  const dir = tempDir();
  const fifo = `${dir}/gate`;
  const mk = await new Deno.Command("mkfifo", { args: [fifo] }).output();
  assert.ok(mk.success);
  await withFixture(["--permission", "--gate-fifo", fifo], async (f) => {
    await init(f);
    const sid = await newSession(f);
    let settled = false;
    const pending = promptText(f, sid, "go").finally(() => settled = true);
    await f.until(() => f.chunks().length >= 1);
    assert.equal(f.chunks()[0], "permission: allow_once\necho: go (turn 1)");
    assert.equal(settled, false);
    await Deno.writeTextFile(fifo, "release\n");
    assert.equal((await pending).stopReason, "end_turn");
  });
});

function textOf(n: acp.SessionNotification): string | undefined {
  const u = n.update;
  if (
    (u.sessionUpdate === "agent_message_chunk" ||
      u.sessionUpdate === "user_message_chunk") && u.content.type === "text"
  ) {
    return u.content.text;
  }
  return undefined;
}
