/**
 * Run events in the relay's spellings (daemon.py's codes, LangBot's
 * finish_reason, seconds) and back to the runner's, whichever daemon sent
 * them.
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../../lib/events.ts";
import {
  fromRelayEvent,
  relayCodeOf,
  toRelayEvent,
} from "../../lib/relay/wire_events.ts";
import { emptyInputError } from "../../lib/run/prompt.ts";
import { assertLangBotEvent } from "../contracts.ts";

const failed = (data: Record<string, unknown>): RunEvent => ({
  run_id: "r",
  type: "run.failed",
  data,
});

Deno.test("the relay codes of the failures daemon.py also reports", () => {
  assert.deepEqual(
    [
      "acp.missing_binary",
      "run.timeout",
      "acp.initialize_timeout",
      "config.invalid",
      "acp.session_missing",
      "acp.start_timeout",
      "acp.empty_response",
      "acp.process_exited",
      "runner.internal",
    ].map((code) => relayCodeOf(code, undefined)),
    [
      "acp.command_not_found",
      "acp.daemon_timeout",
      "acp.daemon_timeout",
      "acp.daemon_config_invalid",
      "acp.session_missing",
      "acp.start_timeout",
      "acp.empty_response",
      "acp.process_exited",
      "acp.daemon_unexpected",
    ],
  );
  const empty = emptyInputError();
  assert.equal(
    relayCodeOf(empty.code, empty.detail),
    "acp.daemon_empty_prompt",
  );
});

Deno.test("our daemon's events: whole seconds, LangBot's finish_reason and daemon.py's code, ours beside the event", () => {
  assert.deepEqual(
    toRelayEvent({
      run_id: "r",
      type: "run.completed",
      data: { finish_reason: "end_turn", message: { content: "hi" } },
      sequence: 4,
      timestamp: 1_718_000_000_923,
    }),
    {
      event: {
        run_id: "r",
        type: "run.completed",
        data: { finish_reason: "stop", message: { content: "hi" } },
        sequence: 4,
        timestamp: 1_718_000_000,
      },
      runner: {
        timestamp_ms: 1_718_000_000_923,
        data: { finish_reason: "end_turn" },
      },
    },
  );
  assert.deepEqual(
    toRelayEvent(
      failed({
        error: "slow",
        code: "run.timeout",
        retryable: true,
        stderr_tail: "tail",
      }),
    ),
    {
      event: failed({
        error: "slow",
        code: "acp.daemon_timeout",
        retryable: true,
      }),
      runner: { data: { code: "run.timeout", stderr_tail: "tail" } },
    },
  );
  const untouched = failed({ error: "x", code: "acp.session_missing" });
  assert.deepEqual(toRelayEvent(untouched), { event: untouched });
});

Deno.test("tool events on the wire: parameters and result are objects, error a string, kind and locations beside", () => {
  const started = toRelayEvent({
    run_id: "r",
    type: "tool.call.started",
    data: {
      tool_call_id: "t",
      tool_name: "Read",
      parameters: "ls -la",
      kind: "read",
      locations: [{ path: "/w/a" }],
    },
  });
  assert.deepEqual(started.event.data, {
    tool_call_id: "t",
    tool_name: "Read",
    parameters: { input: "ls -la" },
  });
  assert.deepEqual(fromRelayEvent(started.event, started.runner).data, {
    tool_call_id: "t",
    tool_name: "Read",
    parameters: "ls -la",
    kind: "read",
    locations: [{ path: "/w/a" }],
  });
  for (
    const [result, wire] of [
      [undefined, null],
      ["done", { text: "done" }],
      [[{ type: "text" }], { content: [{ type: "text" }] }],
      [{ exit: 0 }, { exit: 0 }],
    ]
  ) {
    const data: Record<string, unknown> = { tool_call_id: "t", tool_name: "x" };
    if (result !== undefined) data.result = result;
    const relayed = toRelayEvent({
      run_id: "r",
      type: "tool.call.completed",
      data,
    });
    assert.deepEqual(relayed.event.data, {
      tool_call_id: "t",
      tool_name: "x",
      result: wire,
      error: null,
    });
    assert.deepEqual(fromRelayEvent(relayed.event, relayed.runner).data, data);
  }
  const failedTool = toRelayEvent({
    run_id: "r",
    type: "tool.call.completed",
    data: { tool_call_id: "t", tool_name: "x", error: { exitCode: 2 } },
  });
  assert.deepEqual(failedTool.event.data.error, '{"exitCode":2}');
  assert.deepEqual(
    fromRelayEvent(failedTool.event, failedTool.runner).data.error,
    { exitCode: 2 },
  );
});

Deno.test("the hub takes either spelling and gives the runner's", () => {
  // daemon.py: no timestamp, finish_reason stop, its own codes, no retryable.
  assert.deepEqual(
    fromRelayEvent({
      run_id: "r",
      type: "run.completed",
      data: { finish_reason: "stop" },
    }).data,
    { finish_reason: "end_turn" },
  );
  assert.deepEqual(
    fromRelayEvent(failed({
      error: "ACP agent returned no assistant text",
      code: "acp.empty_response",
    })).data,
    {
      error: "ACP agent returned no assistant text",
      code: "acp.empty_response",
      retryable: true,
    },
  );
  for (
    const [wire, ours] of [
      ["acp.daemon_timeout", "run.timeout"],
      ["acp.command_not_found", "acp.missing_binary"],
      ["acp.daemon_config_invalid", "config.invalid"],
      ["acp.daemon_empty_prompt", "config.invalid"],
      ["acp.session_missing", "acp.session_missing"],
      ["acp.protocol_error", "acp.protocol_error"],
    ]
  ) {
    assert.equal(
      fromRelayEvent(failed({ error: "e", code: wire, retryable: false })).data
        .code,
      ours,
      wire,
    );
  }
  // Ours: the runner details win; whole seconds become the exact milliseconds.
  const ours = toRelayEvent({
    run_id: "r",
    type: "run.completed",
    data: { finish_reason: "max_turn_requests" },
    timestamp: 1_718_000_000_123,
  });
  assert.deepEqual(fromRelayEvent(ours.event, ours.runner), {
    run_id: "r",
    type: "run.completed",
    data: { finish_reason: "max_turn_requests" },
    timestamp: 1_718_000_000_123,
  });
  const timedOut = toRelayEvent(failed({
    error: "e",
    code: "acp.initialize_timeout",
    retryable: true,
  }));
  assert.deepEqual(
    fromRelayEvent(timedOut.event, timedOut.runner).data,
    { error: "e", code: "acp.initialize_timeout", retryable: true },
  );
  // An older runner daemon's stop_reason and runner_code inside data still count.
  assert.deepEqual(
    fromRelayEvent({
      run_id: "r",
      type: "run.completed",
      data: { finish_reason: "stop", stop_reason: "max_tokens" },
    }).data,
    { finish_reason: "max_tokens" },
  );
  // An older runner daemon's milliseconds stay milliseconds.
  assert.equal(
    fromRelayEvent({ ...failed({}), timestamp: 1_718_000_000_123 }).timestamp,
    1_718_000_000_123,
  );
});

Deno.test("client terminals on the wire: terminal_ids of tool events ride in the runner details and come back; terminal.* pass as they are", () => {
  const events: RunEvent[] = [
    {
      run_id: "r",
      type: "tool.call.started",
      data: {
        tool_call_id: "t1",
        tool_name: "Run make",
        parameters: {},
        kind: "execute",
        terminal_ids: ["term-1"],
      },
    },
    {
      run_id: "r",
      type: "tool.call.completed",
      data: {
        tool_call_id: "t1",
        tool_name: "Run make",
        terminal_ids: ["term-1"],
      },
    },
    {
      run_id: "r",
      type: "terminal.output",
      data: { terminal_id: "term-1", output: "ok\n", truncated: false },
    },
    {
      run_id: "r",
      type: "terminal.exited",
      data: {
        terminal_id: "term-1",
        exit_code: 0,
        signal: null,
        truncated: false,
        timed_out: false,
      },
    },
  ];
  for (const event of events) {
    const wire = toRelayEvent(event);
    assertLangBotEvent(wire.event);
    assert.ok(!("terminal_ids" in wire.event.data), event.type);
    const back = fromRelayEvent(wire.event, wire.runner);
    assert.deepEqual(back.data.terminal_ids, event.data.terminal_ids);
    if (event.type.startsWith("terminal.")) {
      assert.deepEqual(wire.event.data, event.data);
    }
  }
});
