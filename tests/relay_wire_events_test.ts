/**
 * Run events in the relay's spellings (daemon.py's codes, LangBot's
 * finish_reason, seconds) and back to the runner's, whichever daemon sent
 * them.
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../lib/events.ts";
import {
  fromRelayEvent,
  relayCodeOf,
  toRelayEvent,
} from "../lib/relay/wire_events.ts";
import { emptyInputError } from "../lib/run/prompt.ts";

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

Deno.test("our daemon's events: seconds, LangBot's finish_reason, daemon.py's code with ours kept", () => {
  assert.deepEqual(
    toRelayEvent({
      run_id: "r",
      type: "run.completed",
      data: { finish_reason: "end_turn", message: { content: "hi" } },
      sequence: 4,
      timestamp: 1_718_000_000_123,
    }),
    {
      run_id: "r",
      type: "run.completed",
      data: {
        finish_reason: "stop",
        message: { content: "hi" },
        stop_reason: "end_turn",
      },
      sequence: 4,
      timestamp: 1_718_000_000.123,
    },
  );
  assert.deepEqual(
    toRelayEvent(
      failed({ error: "slow", code: "run.timeout", retryable: true }),
    )
      .data,
    {
      error: "slow",
      code: "acp.daemon_timeout",
      retryable: true,
      runner_code: "run.timeout",
    },
  );
  const untouched = failed({ error: "x", code: "acp.session_missing" });
  assert.deepEqual(toRelayEvent(untouched), untouched);
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
  // Ours: runner_code and stop_reason win; seconds become milliseconds.
  const ours = toRelayEvent({
    run_id: "r",
    type: "run.completed",
    data: { finish_reason: "max_turn_requests" },
    timestamp: 1_718_000_000_123,
  });
  assert.deepEqual(fromRelayEvent(ours), {
    run_id: "r",
    type: "run.completed",
    data: { finish_reason: "max_turn_requests" },
    timestamp: 1_718_000_000_123,
  });
  assert.deepEqual(
    fromRelayEvent(
      toRelayEvent(failed({
        error: "e",
        code: "acp.initialize_timeout",
        retryable: true,
      })),
    ).data,
    { error: "e", code: "acp.initialize_timeout", retryable: true },
  );
  // An older runner daemon's milliseconds stay milliseconds.
  assert.equal(
    fromRelayEvent({ ...failed({}), timestamp: 1_718_000_000_123 }).timestamp,
    1_718_000_000_123,
  );
});
