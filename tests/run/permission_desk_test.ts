/**
 * The permission desk (`permission-decision=ask`) as the events show it: what
 * a person is asked (`permission.requested`: the tool call, its input
 * redacted and cut, the offered options, when it expires, the rule), what
 * each way of ending a request decides (`permission.decided`: a person's
 * option or decision, the timeout's fallback, the run's cancel), and that a
 * wanted rejection never becomes an approval. End to end over HTTP:
 * `tests/server/permissions_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type {
  PermissionOption,
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import {
  createPermissionDesk,
  type PermissionDeskOptions,
} from "../../lib/run/permission_desk.ts";
import { RunnerError } from "../../lib/errors.ts";

const SECRET = "desk-secret-Qm4Zr8Wx2Kp6";

const ALL_OPTIONS: PermissionOption[] = [
  { optionId: "yes", name: "Allow", kind: "allow_once" },
  { optionId: "always", name: "Always allow", kind: "allow_always" },
  { optionId: "no", name: "Reject", kind: "reject_once" },
  { optionId: "never", name: "Never", kind: "reject_always" },
];

const ALLOW_ONLY: PermissionOption[] = [
  { optionId: "yes", name: "Allow", kind: "allow_once" },
  { optionId: "always", name: "Always allow", kind: "allow_always" },
];

interface Recorded {
  type: string;
  data: Record<string, unknown>;
}

function request(
  options: PermissionOption[] = ALL_OPTIONS,
  toolCall: Partial<RequestPermissionRequest["toolCall"]> = {},
): RequestPermissionRequest {
  return {
    sessionId: "s-1",
    toolCall: {
      toolCallId: "call-7",
      title: "Write notes.txt",
      kind: "edit",
      locations: [{ path: "notes.txt", line: 3 }, { path: "b.txt" }],
      rawInput: { path: "notes.txt", content: `token ${SECRET}` },
      ...toolCall,
    },
    options,
  };
}

/** A desk whose events are recorded; a long timeout unless one is given. */
function desk(options: Partial<PermissionDeskOptions> = {}) {
  const events: Recorded[] = [];
  const opened: string[] = [];
  const made = createPermissionDesk({
    emit: (type, data) => events.push({ type, data }),
    timeoutSeconds: 600,
    fallback: "reject_once",
    secrets: [SECRET],
    onRequest: (requestId) => opened.push(requestId),
    ...options,
  });
  const of = (type: string) => events.filter((e) => e.type === type);
  return {
    desk: made,
    events,
    opened,
    requested: () => of("permission.requested").map((e) => e.data),
    decided: () => of("permission.decided").map((e) => e.data),
  };
}

function badRequest(error: unknown): boolean {
  return error instanceof RunnerError && error.code === "http.bad_request";
}

Deno.test("a person is shown the tool call, its input redacted, every offered option, the expiry and the rule", async () => {
  const { desk: made, requested, opened, decided } = desk({
    timeoutSeconds: 90,
  });
  const before = Date.now();
  const answer = made.ask(request(), 2);
  const after = Date.now();
  const [shown] = requested();
  assert.equal(requested().length, 1);
  assert.match(String(shown.request_id), /^[0-9a-f-]{36}$/);
  assert.deepEqual(opened, [shown.request_id]);
  assert.deepEqual(made.pending(), [shown.request_id]);
  assert.deepEqual(shown.tool_call, {
    tool_call_id: "call-7",
    title: "Write notes.txt",
    kind: "edit",
    locations: [{ path: "notes.txt", line: 3 }, { path: "b.txt", line: null }],
    raw_input_summary: '{"path":"notes.txt","content":"token [REDACTED]"}',
  });
  assert.deepEqual(shown.options, [
    { option_id: "yes", name: "Allow", kind: "allow_once" },
    { option_id: "always", name: "Always allow", kind: "allow_always" },
    { option_id: "no", name: "Reject", kind: "reject_once" },
    { option_id: "never", name: "Never", kind: "reject_always" },
  ]);
  assert.equal(shown.rule, 2);
  const expires = Date.parse(String(shown.expires_at));
  assert.ok(expires >= before + 90_000 && expires <= after + 90_000);
  assert.deepEqual(decided(), []);

  assert.equal(
    made.answer(String(shown.request_id), { option_id: "yes" }),
    "answered",
  );
  assert.deepEqual(await answer, {
    outcome: { outcome: "selected", optionId: "yes" },
  });
  assert.deepEqual(decided(), [{
    request_id: shown.request_id,
    tool_call_id: "call-7",
    title: "Write notes.txt",
    decision: "allow_once",
    by: "caller",
    outcome: "selected",
    option_id: "yes",
    rule: 2,
  }]);
  assert.deepEqual(made.pending(), []);
});

Deno.test("a long input is cut to 400 characters after it is redacted; a text input is shown as it is; no input, no tool call: nulls", async () => {
  const long = "x".repeat(420);
  const { desk: made, requested } = desk();
  const asked = [
    made.ask(request(ALL_OPTIONS, { rawInput: `${SECRET} ${long}` })),
    made.ask(request(ALL_OPTIONS, { rawInput: `run ${SECRET}` })),
    made.ask(request(ALL_OPTIONS, { rawInput: undefined })),
    made.ask({ sessionId: "s-1", options: ALL_OPTIONS } as never),
    made.ask({ sessionId: "s-1", toolCall: { toolCallId: "t" } } as never),
  ];
  const [cut, text, none, bare, noOptions] = requested();
  const summary = String(
    (cut.tool_call as Record<string, unknown>).raw_input_summary,
  );
  assert.equal(summary.length, 400);
  assert.equal(summary, `[REDACTED] ${long}`.slice(0, 399) + "…");
  assert.equal(
    (text.tool_call as Record<string, unknown>).raw_input_summary,
    "run [REDACTED]",
  );
  assert.equal(
    (none.tool_call as Record<string, unknown>).raw_input_summary,
    null,
  );
  assert.deepEqual(bare.tool_call, {
    tool_call_id: null,
    title: null,
    kind: null,
    locations: [],
    raw_input_summary: null,
  });
  assert.deepEqual(noOptions.options, []);
  // No rule sent it to a person: the events carry no rule.
  assert.ok(!("rule" in cut));
  made.cancelAll();
  await Promise.all(asked);
});

Deno.test("a summary exactly 400 characters long is not cut", async () => {
  const { desk: made, requested } = desk();
  const asked = made.ask(request(ALL_OPTIONS, { rawInput: "y".repeat(400) }));
  assert.equal(
    (requested()[0].tool_call as Record<string, unknown>).raw_input_summary,
    "y".repeat(400),
  );
  made.cancelAll();
  await asked;
});

Deno.test("a person's decision picks the offered option of its kind, else its family's; a rejection where only approvals are offered is answered cancelled", async () => {
  const cases: [
    PermissionOption[],
    string,
    RequestPermissionResponse,
    Record<string, unknown>,
  ][] = [
    [ALL_OPTIONS, "reject_always", {
      outcome: { outcome: "selected", optionId: "never" },
    }, { decision: "reject_always", outcome: "selected", option_id: "never" }],
    [ALL_OPTIONS.slice(0, 3), "reject_always", {
      outcome: { outcome: "selected", optionId: "no" },
    }, { decision: "reject_once", outcome: "selected", option_id: "no" }],
    [ALLOW_ONLY, "reject_once", { outcome: { outcome: "cancelled" } }, {
      decision: "cancelled",
      outcome: "cancelled",
      reason:
        "no offered option fits the answer; a rejection never becomes an approval",
    }],
  ];
  for (const [options, decision, response, shown] of cases) {
    const { desk: made, requested, decided } = desk();
    const asked = made.ask(request(options));
    const requestId = String(requested()[0].request_id);
    assert.equal(
      made.answer(requestId, { decision } as never),
      "answered",
    );
    assert.deepEqual(await asked, response, decision);
    assert.deepEqual(decided(), [{
      request_id: requestId,
      tool_call_id: "call-7",
      title: "Write notes.txt",
      by: "caller",
      ...shown,
    }]);
  }
});

Deno.test("an answer the agent did not offer, or no permission kind, is refused with http.bad_request and the request stays open", async () => {
  const { desk: made, requested, decided } = desk();
  const asked = made.ask(request(ALLOW_ONLY));
  const requestId = String(requested()[0].request_id);
  assert.throws(
    () => made.answer(requestId, { option_id: "no" }),
    (error: unknown) =>
      badRequest(error) &&
      (error as Error).message ===
        'The agent did not offer option_id "no". Use one of: yes, always.',
  );
  assert.throws(
    () => made.answer(requestId, { decision: "allow" } as never),
    (error: unknown) =>
      badRequest(error) &&
      (error as Error).message ===
        "decision must be one of reject_once, reject_always, allow_once, allow_always.",
  );
  assert.deepEqual(made.pending(), [requestId]);
  assert.deepEqual(decided(), []);
  assert.equal(made.answer(requestId, { option_id: "always" }), "answered");
  assert.deepEqual(await asked, {
    outcome: { outcome: "selected", optionId: "always" },
  });
});

Deno.test("an unknown request is unknown; an answered one is already answered, and its first answer stands", async () => {
  const { desk: made, requested, decided } = desk();
  assert.equal(made.answer("nope", { option_id: "yes" }), "unknown");
  const asked = made.ask(request());
  const requestId = String(requested()[0].request_id);
  assert.equal(made.answer(requestId, { option_id: "no" }), "answered");
  assert.equal(
    made.answer(requestId, { option_id: "yes" }),
    "already_answered",
  );
  assert.deepEqual(await asked, {
    outcome: { outcome: "selected", optionId: "no" },
  });
  assert.equal(decided().length, 1);
  assert.equal(decided()[0].decision, "reject_once");
});

Deno.test("no answer in time: the fallback decides, by timeout, with its reason; a rejecting fallback never allows", async () => {
  const allowing = desk({ timeoutSeconds: 0.05, fallback: "allow_always" });
  const allowed = await allowing.desk.ask(request(), "default");
  assert.deepEqual(allowed, {
    outcome: { outcome: "selected", optionId: "always" },
  });
  const [requested] = allowing.requested();
  assert.deepEqual(allowing.decided(), [{
    request_id: requested.request_id,
    tool_call_id: "call-7",
    title: "Write notes.txt",
    decision: "allow_always",
    by: "timeout",
    outcome: "selected",
    option_id: "always",
    reason: '"allow_always" was offered',
    rule: "default",
  }]);
  assert.equal(
    allowing.desk.answer(String(requested.request_id), { option_id: "yes" }),
    "already_answered",
  );

  const rejecting = desk({ timeoutSeconds: 0.05, fallback: "reject_once" });
  assert.deepEqual(await rejecting.desk.ask(request(ALLOW_ONLY)), {
    outcome: { outcome: "cancelled" },
  });
  assert.deepEqual(rejecting.decided(), [{
    request_id: rejecting.requested()[0].request_id,
    tool_call_id: "call-7",
    title: "Write notes.txt",
    decision: "cancelled",
    by: "timeout",
    outcome: "cancelled",
    reason:
      '"reject_once" was wanted but the agent offered no reject option; answered cancelled rather than allow',
  }]);
});

Deno.test("cancelling the run answers every open request cancelled, by cancel", async () => {
  const { desk: made, requested, decided } = desk();
  const asked = [made.ask(request()), made.ask(request(ALLOW_ONLY), 1)];
  assert.equal(made.pending().length, 2);
  made.cancelAll();
  assert.deepEqual(await Promise.all(asked), [
    { outcome: { outcome: "cancelled" } },
    { outcome: { outcome: "cancelled" } },
  ]);
  assert.deepEqual(made.pending(), []);
  const ids = requested().map((shown) => shown.request_id);
  assert.deepEqual(decided(), [{
    request_id: ids[0],
    tool_call_id: "call-7",
    title: "Write notes.txt",
    decision: "cancelled",
    by: "cancel",
    outcome: "cancelled",
  }, {
    request_id: ids[1],
    tool_call_id: "call-7",
    title: "Write notes.txt",
    decision: "cancelled",
    by: "cancel",
    outcome: "cancelled",
    rule: 1,
  }]);
  assert.equal(
    made.answer(String(ids[0]), { option_id: "yes" }),
    "already_answered",
  );
});

Deno.test("a desk made without onRequest or secrets (as runner serve's) asks and takes answers; a null input shows as null", async () => {
  const events: Recorded[] = [];
  const made = createPermissionDesk({
    emit: (type, data) => events.push({ type, data }),
    timeoutSeconds: 600,
    fallback: "reject_once",
  });
  const asked = made.ask(request(ALL_OPTIONS, { rawInput: null }));
  const [shown] = events.map((e) => e.data);
  assert.equal(
    (shown.tool_call as Record<string, unknown>).raw_input_summary,
    null,
  );
  assert.equal(
    made.answer(String(shown.request_id), { option_id: "no" }),
    "answered",
  );
  assert.deepEqual(await asked, {
    outcome: { outcome: "selected", optionId: "no" },
  });
});

Deno.test("an option id that was not offered is echoed back cut to 80 characters", async () => {
  const { desk: made, requested } = desk();
  const asked = made.ask(request(ALLOW_ONLY));
  const requestId = String(requested()[0].request_id);
  const long = "z".repeat(200);
  assert.throws(
    () => made.answer(requestId, { option_id: long }),
    (error: unknown) =>
      badRequest(error) &&
      (error as Error).message ===
        `The agent did not offer option_id "${
          "z".repeat(80)
        }". Use one of: yes, always.`,
  );
  made.cancelAll();
  await asked;
});

Deno.test("permission-timeout is in seconds: a request with the longer timeout is still open when the shorter one has run out", async () => {
  const waiting = desk({ timeoutSeconds: 30 });
  const asked = waiting.desk.ask(request());
  const hurried = desk({ timeoutSeconds: 0.05, fallback: "allow_once" });
  assert.deepEqual(await hurried.desk.ask(request()), {
    outcome: { outcome: "selected", optionId: "yes" },
  });
  assert.equal(waiting.desk.pending().length, 1);
  assert.deepEqual(waiting.decided(), []);
  waiting.desk.cancelAll();
  await asked;
});
