/**
 * Session config options through `runner run` and the fixture agent:
 * `model`, `mode` and `session-config-json` are set before the first prompt
 * (config options, or the legacy set_mode/set_model), their values in force
 * are a `session.configured` event, a value the agent does not offer fails
 * before any prompt with the valid values, and a restored session gets them
 * again.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  customRunArgs,
  fixtureCommand,
  parseJsonLines,
  recordedCalls,
  runCli,
  tempDir,
} from "../helpers.ts";

interface Outcome {
  code: number;
  events: Record<string, unknown>[];
  methods: string[];
  calls: Record<string, unknown>[];
}

async function run(
  fixtureFlags: string[],
  extra: string[],
  dirs: { data?: string; record?: string; workspace?: string } = {},
): Promise<Outcome> {
  const record = dirs.record ?? join(tempDir(), "record.jsonl");
  const result = await runCli(
    customRunArgs(
      fixtureCommand(...fixtureFlags, "--record", record),
      dirs.workspace ?? join(tempDir(), "ws"),
      [
        ...["--data-dir", dirs.data ?? tempDir()],
        ...["--langbot-assets-enabled", "false", "--json"],
        ...extra,
        "hi",
      ],
    ),
  );
  const calls = recordedCalls(record);
  return {
    code: result.code,
    events: parseJsonLines(result.stdout),
    methods: calls.map((r) => r.method as string),
    calls,
  };
}

function data(event: Record<string, unknown> | undefined) {
  return (event?.data ?? {}) as Record<string, unknown>;
}

function configured(outcome: Outcome) {
  return outcome.events.filter((e) => e.type === "session.configured").map(
    data,
  );
}

/** Data dir, record and workspace that several runs of one conversation share. */
function conversationDirs() {
  return {
    data: tempDir(),
    record: join(tempDir(), "record.jsonl"),
    workspace: join(tempDir(), "ws"),
  };
}

/** Fixture flags of an agent with config options that restores its sessions. */
function loadingConfigFlags(): string[] {
  return [
    "--session-config",
    "both",
    "--load-session",
    "--state-dir",
    tempDir(),
  ];
}

/** The session config values the run remembered with its conversation. */
function remembered(outcome: Outcome) {
  return outcome.events.filter((e) =>
    e.type === "state.updated" &&
    data(e).key === "external.acp_session_config"
  ).map((e) => data(e).value);
}

function answer(outcome: Outcome): string {
  const done = outcome.events.find((e) => e.type === "message.completed");
  return String((data(done).message as { content: string }).content);
}

function failure(outcome: Outcome) {
  return data(outcome.events.find((e) => e.type === "run.failed"));
}

Deno.test("model, mode and session-config-json are set with session/set_config_option before the prompt and shown in session.configured", async () => {
  const outcome = await run(["--session-config", "options"], [
    "--model",
    "fast",
    "--mode",
    "plan",
    "--session-config-json",
    '{"verbose":true,"effort":"medium"}',
  ]);
  assert.equal(outcome.code, 0, JSON.stringify(outcome.events));
  const sets = outcome.calls.filter((c) =>
    c.method === "session/set_config_option"
  ).map((c) => {
    const { configId, value } = c.params as Record<string, unknown>;
    return [configId, value];
  });
  // effort is already medium: no call for it.
  assert.deepEqual(sets, [["model", "fast"], ["mode", "plan"], [
    "verbose",
    true,
  ]]);
  assert.ok(
    outcome.methods.lastIndexOf("session/set_config_option") <
      outcome.methods.indexOf("session/prompt"),
  );
  assert.deepEqual(configured(outcome), [{
    model: "fast",
    mode: "plan",
    config: { mode: "plan", model: "fast", effort: "medium", verbose: true },
    changed: ["model", "mode", "verbose"],
  }]);
  assert.match(
    answer(outcome),
    /^config: mode=plan model=fast effort=medium verbose=true\n/,
  );
});

Deno.test("an agent with only legacy modes and models gets session/set_mode and session/set_model", async () => {
  const outcome = await run(["--session-config", "modes"], [
    "--model",
    "fast",
    "--mode",
    "plan",
  ]);
  assert.equal(outcome.code, 0, JSON.stringify(outcome.events));
  assert.ok(outcome.methods.includes("session/set_model"));
  assert.ok(outcome.methods.includes("session/set_mode"));
  assert.ok(!outcome.methods.includes("session/set_config_option"));
  assert.deepEqual(configured(outcome)[0].config, {
    mode: "plan",
    model: "fast",
  });
  assert.match(answer(outcome), /^config: mode=plan model=fast\n/);
});

Deno.test("a mode the agent does not offer fails before any prompt, not retryable, listing the valid values", async () => {
  for (const shape of ["both", "modes"]) {
    const outcome = await run(["--session-config", shape], ["--mode", "yolo"]);
    assert.equal(outcome.code, 1);
    const failed = failure(outcome);
    assert.equal(failed.code, "acp.config_unavailable");
    assert.equal(failed.retryable, false);
    assert.match(
      String(failed.error),
      /^mode: "yolo" is not .*Valid values: default, plan, acceptEdits\./,
    );
    assert.ok(!outcome.methods.includes("session/prompt"));
    assert.equal(configured(outcome).length, 0);
  }
});

Deno.test("an option whose values follow another's is checked against the values after that change", async () => {
  const linked = ["--session-config", "options", "--config-linked"];
  const high = await run(linked, [
    "--model",
    "fast",
    "--session-config-json",
    '{"effort":"high"}',
  ]);
  assert.equal(failure(high).code, "acp.config_unavailable");
  assert.match(String(failure(high).error), /Valid values: low\./);
  assert.ok(!high.methods.includes("session/prompt"));
  // Without the link the same values are offered and set.
  const free = await run(["--session-config", "options"], [
    "--model",
    "fast",
    "--session-config-json",
    '{"effort":"high"}',
  ]);
  assert.equal(free.code, 0);
  assert.equal(
    (configured(free)[0].config as { effort: string }).effort,
    "high",
  );
});

Deno.test("an option the agent does not have, and an agent that refuses to set one, fail before the prompt", async () => {
  const unknown = await run(["--session-config", "options"], [
    "--session-config-json",
    '{"temperature":"hot"}',
  ]);
  assert.equal(failure(unknown).code, "acp.config_unavailable");
  assert.match(
    String(failure(unknown).error),
    /^temperature: the agent offers no such session config option \(it offers: mode, model, effort, verbose\)/,
  );
  const refused = await run(["--session-config", "both", "--fail-set-config"], [
    "--mode",
    "plan",
  ]);
  assert.equal(failure(refused).code, "acp.config_failed");
  assert.equal(failure(refused).retryable, false);
  assert.match(String(failure(refused).error), /fixture --fail-set-config/);
  assert.ok(!refused.methods.includes("session/prompt"));
  const none = await run([], ["--model", "fast"]);
  assert.equal(failure(none).code, "acp.config_unavailable");
  assert.match(String(failure(none).error), /it offers none/);
});

Deno.test("values the agent already has cost no call; an agent without choices and a run without wishes see no session.configured", async () => {
  const same = await run(["--session-config", "both"], ["--mode", "default"]);
  assert.equal(same.code, 0);
  assert.ok(!same.methods.includes("session/set_config_option"));
  assert.deepEqual(configured(same)[0].changed, []);
  assert.equal(configured(same)[0].mode, "default");
  const plain = await run([], []);
  assert.equal(plain.code, 0);
  assert.equal(configured(plain).length, 0);
});

Deno.test("the agent's own mode change during a turn is a session.configured by the agent", async () => {
  const outcome = await run([
    "--session-config",
    "both",
    "--switch-mode-on-prompt",
    "acceptEdits",
  ], []);
  assert.equal(outcome.code, 0);
  const byAgent = configured(outcome).filter((d) => d.by === "agent");
  assert.ok(byAgent.length >= 1);
  assert.equal(byAgent.at(-1)!.mode, "acceptEdits");
});

Deno.test("a restored session (session/load in a new agent process) gets the run's values again", async () => {
  const dirs = conversationDirs();
  const state = tempDir();
  const flags = [
    "--session-config",
    "both",
    "--load-session",
    "--state-dir",
    state,
  ];
  const args = ["--conversation", "c1", "--mode", "plan"];
  const first = await run(flags, args, dirs);
  assert.equal(first.code, 0, JSON.stringify(first.events));
  const second = await run(flags, args, dirs);
  assert.equal(second.code, 0, JSON.stringify(second.events));
  assert.ok(second.methods.includes("session/load"));
  assert.ok(
    second.methods.indexOf("session/load") <
      second.methods.indexOf("session/set_config_option"),
  );
  assert.deepEqual(configured(second)[0].changed, ["mode"]);
  assert.match(answer(second), /^config: mode=plan /);
});

Deno.test("runner run --conversation remembers the asked values with the session: a later run that asks none gets them again, one that asks another wins, reuse-session=false forgets them", async () => {
  const dirs = conversationDirs();
  const flags = loadingConfigFlags();
  const conversation = ["--conversation", "c-memory"];
  const first = await run(flags, [
    ...conversation,
    "--model",
    "fast",
    "--mode",
    "plan",
  ], dirs);
  assert.equal(first.code, 0, JSON.stringify(first.events));
  assert.deepEqual(remembered(first), [{ model: "fast", mode: "plan" }]);
  assert.equal(configured(first)[0].remembered, undefined);
  // A new agent process loads the session from its defaults; the run asks nothing.
  const second = await run(flags, conversation, dirs);
  assert.equal(second.code, 0, JSON.stringify(second.events));
  assert.ok(second.methods.includes("session/load"));
  assert.deepEqual(configured(second)[0], {
    model: "fast",
    mode: "plan",
    config: { mode: "plan", model: "fast", effort: "medium", verbose: false },
    changed: ["model", "mode"],
    remembered: ["model", "mode"],
  });
  assert.match(answer(second), /^config: mode=plan model=fast /);
  assert.deepEqual(remembered(second), []);
  // A value the run asks for wins and is remembered in its place.
  const third = await run(flags, [
    ...conversation,
    "--mode",
    "acceptEdits",
  ], dirs);
  assert.equal(third.code, 0, JSON.stringify(third.events));
  assert.deepEqual(configured(third)[0].remembered, ["model"]);
  assert.match(answer(third), /^config: mode=acceptEdits model=fast /);
  assert.deepEqual(remembered(third), [{ model: "fast", mode: "acceptEdits" }]);
  const fourth = await run(flags, conversation, dirs);
  assert.match(answer(fourth), /^config: mode=acceptEdits model=fast /);
  // A fresh session (reuse-session=false) starts from the run's own values,
  // and they, none here, are what the conversation remembers from then on.
  const fresh = await run(flags, [
    ...conversation,
    "--reuse-session",
    "false",
  ], dirs);
  assert.equal(fresh.code, 0, JSON.stringify(fresh.events));
  assert.ok(!fresh.methods.includes("session/load"));
  assert.match(answer(fresh), /^config: mode=default model=smart /);
  assert.equal(configured(fresh)[0].remembered, undefined);
  assert.deepEqual(remembered(fresh), [{}]);
  const after = await run(flags, conversation, dirs);
  assert.ok(after.methods.includes("session/load"));
  assert.equal(configured(after)[0].remembered, undefined);
  assert.match(answer(after), /^config: mode=default model=smart /);
});

Deno.test("a remembered value the agent no longer offers is left out and forgotten, not a failure; one the run asks for still fails", async () => {
  const dirs = conversationDirs();
  // The same command line (so the same stored session) offers what $SHAPE says.
  const flags = [
    "--session-config-env",
    "SHAPE",
    "--load-session",
    "--state-dir",
    tempDir(),
  ];
  const shape = (
    name: string,
  ) => ["--env-json", JSON.stringify({ SHAPE: name })];
  const conversation = ["--conversation", "c-gone"];
  const first = await run(flags, [
    ...conversation,
    ...shape("both"),
    "--session-config-json",
    '{"verbose":true}',
  ], dirs);
  assert.equal(first.code, 0, JSON.stringify(first.events));
  const second = await run(flags, [...conversation, ...shape("modes")], dirs);
  assert.equal(second.code, 0, JSON.stringify(second.events));
  assert.deepEqual(configured(second)[0].dropped, ["verbose"]);
  assert.equal(configured(second)[0].remembered, undefined);
  assert.ok(second.methods.includes("session/prompt"));
  assert.deepEqual(
    second.events.filter((e) =>
      e.type === "state.updated" &&
      data(e).key === "external.acp_session_config"
    ).map((e) => data(e).value),
    [{}],
  );
  const asked = await run(flags, [
    ...conversation,
    ...shape("modes"),
    "--session-config-json",
    '{"verbose":true}',
  ], dirs);
  assert.equal(asked.code, 1);
  assert.equal(failure(asked).code, "acp.config_unavailable");
  assert.ok(!asked.methods.includes("session/prompt"));
});

Deno.test("a model asked for wins over a remembered model option, an empty model asks nothing, and a value that holds a secret is not remembered", async () => {
  const dirs = conversationDirs();
  const flags = loadingConfigFlags();
  const conversation = ["--conversation", "c-alias"];
  const first = await run(flags, [
    ...conversation,
    "--session-config-json",
    '{"model":"fast"}',
  ], dirs);
  assert.equal(first.code, 0, JSON.stringify(first.events));
  // The option id `model` and the key `model` are one choice: the run's wins.
  const second = await run(flags, [...conversation, "--model", "smart"], dirs);
  assert.equal(second.code, 0, JSON.stringify(second.events));
  assert.match(answer(second), / model=smart /);
  assert.equal(configured(second)[0].remembered, undefined);
  assert.deepEqual(remembered(second), [{ model: "smart" }]);
  // An empty model (a form's empty field) asks nothing: the memory holds.
  const third = await run(flags, [...conversation, "--model", ""], dirs);
  assert.equal(third.code, 0, JSON.stringify(third.events));
  assert.match(answer(third), / model=smart /);
  assert.deepEqual(remembered(third), []);
  // A value that is also a secret would be stored redacted: not remembered.
  const fourth = await run(flags, [
    ...conversation,
    "--model",
    "fast",
    "--env-json",
    JSON.stringify({ MY_API_KEY: "fast" }),
  ], dirs);
  assert.equal(fourth.code, 0, JSON.stringify(fourth.events));
  assert.deepEqual(remembered(fourth), []);
  const fifth = await run(flags, conversation, dirs);
  assert.equal(fifth.code, 0, JSON.stringify(fifth.events));
  assert.match(answer(fifth), / model=smart /);
});
