/**
 * Client terminals through a real `runner serve`: a command's output streams
 * as `terminal.output` over SSE, a command left running is gone (its whole
 * process group) by the time `run.completed` arrives, also when the agent is
 * kept warm, and with `permission-decision=ask` a person approves the
 * command through the HTTP permissions endpoint before it starts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { processGroupMembers } from "../../lib/agent/process_table.ts";
import type { RunEvent } from "../../lib/events.ts";
import { readRecord } from "../helpers.ts";
import {
  apiFetch,
  assertStatus,
  fixtureConfig,
  postJson,
  readUntil,
  sseEvents,
  streamUntil,
  withServe,
} from "../serve_test_helpers.ts";
import { listAgents, sendMessage } from "../warm_helpers.ts";

const ARGS = ["--allow-custom-commands", "--client-terminals", "true"];

/**
 * Prints the command's process group as the host sees it (a builtin `read`
 * of /proc/self, so also from inside a PID namespace, where `$$` is small).
 */
const PRINT_GROUP = "read -r _ _ _ _ group _ < /proc/self/stat; echo $group";

const LEFT_RUNNING = [
  "--terminal",
  JSON.stringify({
    command: "sh",
    args: ["-c", `${PRINT_GROUP}; sleep 1000 & sleep 1000`],
    wait: false,
  }),
];

/** Options of {@linkcode postTerminalRun}. */
interface TerminalRunOptions {
  /** The fixture agent's flags. */
  flags?: string[];
  /** More run config. */
  config?: Record<string, unknown>;
}

/** POSTs a "go" run of the fixture agent in `workspace` with client terminals on. */
function postTerminalRun(
  serveUrl: string,
  workspace: string,
  options: TerminalRunOptions = {},
): Promise<Response> {
  return postJson(`${serveUrl}/v1/runs`, {
    input: { text: "go" },
    config: {
      ...fixtureConfig(workspace, options.flags),
      "client-terminals": true,
      ...options.config,
    },
  });
}

/**
 * Starts a server that caps `key` at `cap`, asserts a terminal run asking
 * for `over` is refused with 400 naming the cap, then runs `lower` (a run
 * the cap allows) in its workspace.
 */
async function withCap(
  cap: { key: string; cap: number; over: number },
  lower: (serveUrl: string, workspace: string) => Promise<void>,
): Promise<void> {
  await withServe({
    args: [...ARGS, `--${cap.key}`, String(cap.cap)],
  }, async (serve, dir) => {
    const workspace = join(dir, "ws");
    const response = await postTerminalRun(serve.url, workspace, {
      config: { [cap.key]: cap.over },
    });
    assert.equal(response.status, 400);
    assert.match(
      (await response.json()).error.message,
      new RegExp(`^${cap.key}: at most ${cap.cap} per request`),
    );
    await lower(serve.url, workspace);
  });
}

function outputOf(events: RunEvent[]): string {
  return events.filter((e) => e.type === "terminal.output")
    .map((e) => e.data.output).join("");
}

Deno.test("runner serve: terminal output streams over SSE, and a command left running is gone when run.completed arrives", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const response = await postTerminalRun(serve.url, join(dir, "ws"), {
      flags: [
        "--terminal",
        JSON.stringify({ command: "echo", args: ["hello", "terminal"] }),
        ...LEFT_RUNNING,
      ],
      config: { "langbot-assets-enabled": false },
    });
    assert.equal(response.status, 200);
    const { events, messages } = await streamUntil(response, "run.completed");
    const groups = events.filter((e) => e.type === "terminal.started")
      .map((e) => e.data.terminal_id);
    assert.equal(groups.length, 2);
    const output = outputOf(events);
    assert.match(output, /^hello terminal\n/);
    const pid = Number(output.split("\n")[1]);
    assert.ok(pid > 1, output);
    assert.deepEqual(await processGroupMembers(pid), [], "gone by now");
    const exited = events.filter((e) => e.type === "terminal.exited");
    assert.deepEqual(exited.map((e) => e.data.exit_code), [0, null]);
    assert.equal(exited[1].data.signal, "SIGTERM");
    for await (const _ of messages) { /* the stream ends */ }
  });
});

Deno.test("runner serve: a warm agent keeps its process, never its run's commands", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const record = join(dir, "record.jsonl");
    const config = {
      ...fixtureConfig(join(dir, "ws"), ["--record", record, ...LEFT_RUNNING]),
      "client-terminals": true,
      "langbot-assets-enabled": false,
    };
    const first = await sendMessage(serve, {
      conversation_id: "warm-chat",
      text: "one",
      config,
    });
    assert.equal(first.events.at(-1)!.type, "run.completed");
    const [agent] = await listAgents(serve);
    assert.equal(agent.conversation_id, "warm-chat", "the agent is kept");
    const pid = Number(outputOf(first.events).trim());
    assert.deepEqual(await processGroupMembers(pid), []);
    const second = await sendMessage(serve, {
      conversation_id: "warm-chat",
      text: "two",
      config,
    });
    assert.equal(second.agent, "warm");
    const again = Number(outputOf(second.events).trim());
    assert.notEqual(again, pid);
    assert.deepEqual(await processGroupMembers(again), []);
    const inits = readRecord(record).filter((r) => r.method === "initialize");
    assert.equal(inits.length, 1, "one agent process for both runs");
  });
});

Deno.test("runner serve, permission-decision=ask: a person approves the command over HTTP before it starts", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const response = await postTerminalRun(serve.url, join(dir, "ws"), {
      flags: [
        "--terminal",
        JSON.stringify({ command: "echo", args: ["approved"] }),
      ],
      config: { "permission-decision": "ask", "langbot-assets-enabled": false },
    });
    assert.equal(response.status, 200);
    const { events, messages } = await streamUntil(
      response,
      "permission.requested",
    );
    const requested = events.at(-1)!;
    const toolCall = requested.data.tool_call as Record<string, unknown>;
    assert.equal(toolCall.kind, "execute");
    assert.equal(toolCall.title, "echo approved");
    assert.deepEqual(
      (requested.data.options as { option_id: string; name: string }[])
        .map((o) => [o.option_id, o.name]),
      [["run", "Run"], ["dont-run", "Don't run"]],
    );
    assert.ok(
      !events.some((e) => e.type === "terminal.started"),
      "nothing runs before the answer",
    );
    const answered = await postJson(
      `${serve.url}/v1/runs/${requested.run_id}/permissions/${requested.data.request_id}`,
      { option_id: "run" },
    );
    await assertStatus(answered, 200);
    for await (const message of messages) events.push(JSON.parse(message.data));
    const decided = events.find((e) => e.type === "permission.decided")!;
    assert.deepEqual([decided.data.by, decided.data.decision], [
      "caller",
      "allow_once",
    ]);
    assert.equal(outputOf(events), "approved\n");
    const completed = events.find((e) => e.type === "message.completed")!;
    assert.match(
      String((completed.data.message as { content: string }).content),
      /^terminal 0: .*"output":"approved\\n"/m,
    );
  });
});

Deno.test("runner serve: a caller may not raise terminal-output-bytes past the server's", async () => {
  const cap = { key: "terminal-output-bytes", cap: 1000, over: 2000 };
  await withCap(cap, async (serveUrl, workspace) => {
    const lower = await postTerminalRun(serveUrl, workspace, {
      config: { "terminal-output-bytes": 10 },
    });
    const events = await sseEvents(lower);
    assert.equal(events.at(-1)!.type, "run.completed");
  });
});

Deno.test("runner serve: a cancelled run's commands are gone when its run.failed arrives", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const response = await postTerminalRun(serve.url, join(dir, "ws"), {
      flags: [...LEFT_RUNNING, "--stall-prompt"],
      config: { "langbot-assets-enabled": false },
    });
    const { events, messages } = await streamUntil(response, "terminal.output");
    const pid = Number(String(events.at(-1)!.data.output).trim());
    assert.ok(pid > 1);
    const cancelled = await apiFetch(
      `${serve.url}/v1/runs/${events[0].run_id}/cancel`,
      { method: "POST" },
    );
    await assertStatus(cancelled, 200);
    await readUntil(messages, events, (m) => m.event === "run.failed");
    assert.equal(events.at(-1)!.data.code, "run.cancelled");
    assert.deepEqual(await processGroupMembers(pid), [], "gone by now");
    assert.ok(events.some((e) => e.type === "terminal.exited"));
    for await (const _ of messages) { /* the stream ends */ }
  });
});

Deno.test("runner serve: a caller cannot turn on terminals the operator left off, nor raise terminal-timeout past the operator's", async () => {
  await withServe({ args: ["--allow-custom-commands"] }, async (serve, dir) => {
    const on = await postTerminalRun(serve.url, join(dir, "ws"));
    assert.equal(on.status, 403);
    const body = await on.json();
    assert.equal(body.error.code, "http.forbidden");
    assert.match(body.error.message, /^client-terminals: the operator/);
  });
  const cap = { key: "terminal-timeout", cap: 5, over: 86400 };
  await withCap(cap, async (serveUrl, workspace) => {
    const shorter = await postTerminalRun(serveUrl, workspace, {
      flags: [
        "--terminal",
        JSON.stringify({ command: "sh", args: ["-c", "sleep 1000"] }),
      ],
      config: { "terminal-timeout": 1, "langbot-assets-enabled": false },
    });
    const events = await sseEvents(shorter);
    assert.equal(events.at(-1)!.type, "run.completed");
    const exited = events.find((e) => e.type === "terminal.exited")!;
    assert.equal(exited.data.timed_out, true, "a caller may lower it");
  });
});

Deno.test("runner serve, permission-decision=ask: a cwd swapped for a link out while a person decides is refused, nothing starts", async () => {
  await withServe({ args: ARGS }, async (serve, dir) => {
    const workspace = join(dir, "ws");
    const outside = join(dir, "outside");
    Deno.mkdirSync(join(workspace, "sub"), { recursive: true });
    Deno.mkdirSync(outside);
    const response = await postTerminalRun(serve.url, workspace, {
      flags: [
        "--terminal",
        JSON.stringify({ command: "pwd", cwd: "sub" }),
      ],
      config: { "permission-decision": "ask", "langbot-assets-enabled": false },
    });
    const { events, messages } = await streamUntil(
      response,
      "permission.requested",
    );
    Deno.removeSync(join(workspace, "sub"));
    Deno.symlinkSync(outside, join(workspace, "sub"));
    const requested = events.at(-1)!;
    const answered = await postJson(
      `${serve.url}/v1/runs/${requested.run_id}/permissions/${requested.data.request_id}`,
      { option_id: "run" },
    );
    await assertStatus(answered, 200);
    for await (const message of messages) events.push(JSON.parse(message.data));
    assert.equal(events.at(-1)!.type, "run.completed");
    assert.ok(!events.some((e) => e.type === "terminal.started"));
    const completed = events.find((e) => e.type === "message.completed")!;
    assert.match(
      String((completed.data.message as { content: string }).content),
      /^terminal 0: .*outside the workspace/m,
    );
  });
});
