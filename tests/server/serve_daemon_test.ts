import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { agentPids, fixtureCommand, isAlive, tempDir } from "../helpers.ts";
import { readUntilText } from "../stream_helpers.ts";
import { currentEventCallFlags, sampleSpec } from "../assets_test_helpers.ts";
import {
  DAEMON_TOKEN,
  postDaemonRun,
  serveWithDaemon,
} from "../daemon_test_helpers.ts";
import {
  apiFetch,
  deltaText,
  postJson,
  sseEvents,
  terminals,
} from "../serve_test_helpers.ts";

Deno.test("runner serve --daemon-enabled runs through a real runner daemon: stream, assets over MCP, cancel, /v1/daemons, /metrics", async () => {
  const { serve, daemon } = await serveWithDaemon("laptop-1");
  try {
    await daemon.connected;
    const listed = await (await apiFetch(`${serve.url}/v1/daemons`)).json();
    assert.equal(listed.daemons[0].daemon_id, "laptop-1");
    assert.equal(listed.daemons[0].connected, true);

    const record = join(tempDir(), "record.jsonl");
    const response = await postJson(`${serve.url}/v1/runs`, {
      conversation_id: "d-conv",
      input: { text: "through the daemon" },
      config: {
        provider: "custom",
        location: "daemon",
        "daemon-id": "laptop-1",
        workspace: tempDir(),
        "acp-command": fixtureCommand(
          "--chunks",
          "3",
          ...currentEventCallFlags(record),
        ),
      },
    });
    const events: RunEvent[] = await sseEvents(response);
    assert.equal(terminals(events).length, 1);
    assert.equal(
      events.at(-1)?.type,
      "run.completed",
      JSON.stringify(events.at(-1)),
    );
    // The deltas' text, and the completions carry it whole (the daemon's
    // all_content left out).
    const message = deltaText(events);
    assert.deepEqual(
      events.find((e) => e.type === "message.completed")!.data.message,
      { role: "assistant", content: message },
    );
    assert.equal(
      events.find((e) => e.type === "run.completed")!.data.message,
      undefined,
      "run.completed leaves the answer to message.completed",
    );
    assert.ok(
      events.every((e) =>
        e.type !== "message.delta" ||
        !("all_content" in (e.data.chunk as object))
      ),
    );
    assert.match(message, /^echo: through the daemon \(turn 1\)\nmcp: 6 tools/);
    const sequences = events.map((e) => e.sequence);
    assert.deepEqual(sequences, sequences.map((_, i) => i + 1));
    const mcp = Deno.readTextFileSync(record).split("\n").filter(Boolean).map((
      l,
    ) => JSON.parse(l))
      .filter((l) => l.event === "mcp" && l.method === "tools/call");
    const called = JSON.stringify(mcp[0].body);
    assert.ok(
      called.includes("through the daemon"),
      `the current event comes from the run: ${called}`,
    );
    const conversation =
      await (await apiFetch(`${serve.url}/v1/conversations/d-conv`)).json();
    assert.ok(
      JSON.stringify(conversation).includes(String(
        events.find((e) => e.type === "state.updated")?.data.value,
      )),
    );

    const pidFile = join(tempDir(), "pids.json");
    const held = await postDaemonRun(serve.url, {
      daemonId: "laptop-1",
      text: "hold",
      config: {
        workspace: tempDir(),
        "acp-command": fixtureCommand(
          "--stall-prompt",
          "--grandchild",
          "--pid-file",
          pidFile,
        ),
      },
    });
    const reader = held.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = await readUntilText(reader, "message.delta");
    const runId = text.match(/"run_id":"([^"]+)"/)![1];
    const cancelled = await apiFetch(`${serve.url}/v1/runs/${runId}/cancel`, {
      method: "POST",
    });
    assert.equal(cancelled.status < 300, true);
    await cancelled.body?.cancel();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += value;
    }
    const terminalEvents = [...text.matchAll(
      /event: (run\.failed|run\.completed)\ndata: (.*)\n/g,
    )].map((match) => JSON.parse(match[2]));
    assert.equal(terminalEvents.length, 1, text);
    // The hub delivers nothing after a cancel: the caller's own terminal
    // event says run.cancelled (docs/relay.md, "runJob result").
    assert.deepEqual(
      [terminalEvents[0].type, terminalEvents[0].data.code],
      ["run.failed", "run.cancelled"],
    );
    for (const pid of agentPids(pidFile)) {
      assert.equal(
        isAlive(pid),
        false,
        `daemon agent pid ${pid} survived cancel`,
      );
    }
    const metrics = await (await apiFetch(`${serve.url}/metrics`)).text();
    assert.match(metrics, /runner_daemons_connected 1/);
    assert.match(metrics, /runner_daemons_fenced 0/);
    assert.ok(
      !serve.logs().includes(DAEMON_TOKEN),
      "daemon token in serve logs",
    );
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});

Deno.test("runner serve refuses a weak daemon token off loopback", async () => {
  // Short and weak, and unlike any word of the real error message.
  const WEAK_TOKEN = "wk7Qz";
  const result = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "main.ts",
      "serve",
      "--port",
      "0",
      "--data-dir",
      tempDir(),
      "--daemon-enabled",
      "--daemon-host",
      "0.0.0.0",
      "--daemon-port",
      "0",
      "--daemon-token",
      WEAK_TOKEN,
      "--api-token",
      "x".repeat(40),
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(result.code, 2);
  const stderr = new TextDecoder().decode(result.stderr);
  assert.match(stderr, /runner token/);
  assert.ok(!stderr.includes(WEAK_TOKEN), "the weak token was printed");
});

Deno.test("through runner daemon the agent calls each of the six asset tools end to end", async () => {
  const spec = sampleSpec("daemon");
  const assets = {
    event: spec.event,
    grant: {
      history: spec.grant.history,
      knowledge_bases: spec.grant.knowledgeBases,
      tools: spec.grant.tools,
    },
    inline: (spec.source as { inline: unknown }).inline,
  };
  const { serve, daemon } = await serveWithDaemon("tools-1");
  try {
    await daemon.connected;
    const calls: Array<
      [
        string,
        Record<string, unknown>,
        (result: Record<string, unknown>) => void,
      ]
    > = [
      [
        "langbot_list_assets",
        {},
        (r) => assert.ok(JSON.stringify(r).includes("kb-docs")),
      ],
      [
        "langbot_get_current_event",
        {},
        (r) => assert.ok(JSON.stringify(r).includes("hello from daemon")),
      ],
      [
        "langbot_history_page",
        { limit: 2 },
        (r) =>
          assert.equal(
            (r.structuredContent as { items: unknown[] }).items.length,
            2,
          ),
      ],
      [
        "langbot_retrieve_knowledge",
        { kb_id: "kb-docs", query_text: "Deno TypeScript", top_k: 1 },
        (r) =>
          assert.ok(
            JSON.stringify(r).includes("Deno runs TypeScript directly."),
          ),
      ],
      [
        "langbot_get_tool_detail",
        { tool_name: "weather" },
        (r) => assert.ok(JSON.stringify(r).includes("weather")),
      ],
      [
        "langbot_call_tool",
        { tool_name: "weather", parameters: { city: "Paris" } },
        (r) =>
          assert.deepEqual(r.structuredContent, { city: "Paris", celsius: 21 }),
      ],
      [
        "langbot_call_tool",
        { tool_name: "detail_only" },
        (r) => assert.equal(r.isError, true),
      ],
    ];
    for (const [tool, args, check] of calls) {
      const record = join(tempDir(), "record.jsonl");
      const response = await postJson(`${serve.url}/v1/runs`, {
        input: { text: `call ${tool}` },
        assets,
        config: {
          provider: "custom",
          location: "daemon",
          "daemon-id": "tools-1",
          workspace: tempDir(),
          "acp-command": fixtureCommand(
            "--mcp-http",
            "--mcp-call",
            "--mcp-tool",
            tool,
            "--mcp-args",
            `'${JSON.stringify(args)}'`,
            "--record",
            record,
          ),
        },
      });
      const events = await sseEvents(response);
      assert.equal(
        events.at(-1)?.type,
        "run.completed",
        JSON.stringify(events.at(-1)),
      );
      const answer = Deno.readTextFileSync(record).split("\n").filter(Boolean)
        .map((l) => JSON.parse(l))
        .find((l) => l.event === "mcp" && l.method === "tools/call");
      assert.equal(answer.status, 200, tool);
      check(answer.body.result);
    }
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});
