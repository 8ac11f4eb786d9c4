/**
 * The agent's environment and the redaction of secrets, through `runner run`
 * and the real fixture agent: the allow-list, env-json over everything, and
 * which values are redacted from what the user sees.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { openStore } from "../../lib/store/open.ts";
import {
  fixtureRunArgsIn,
  parseJsonLines,
  readRecord,
  runCli,
  tempDir,
} from "../helpers.ts";

Deno.test("the agent gets only allow-listed env plus env-json; secrets never reach output", async () => {
  const record = join(tempDir(), "record.jsonl");
  const dataDir = tempDir();
  const result = await runCli(
    fixtureRunArgsIn(
      dataDir,
      ["--exit-mid-prompt", "--stderr-mb", "0.01", "--record", record],
      "--env-json",
      JSON.stringify({
        FIXTURE_SECRET: "envjson-secret-value-123",
        TERM: "term-from-env-json",
      }),
      "--json",
      "hi",
    ),
    {
      env: {
        RUNNER_PLANTED_TOKEN: "runner-env-secret-456",
        LC_TEST: "c",
        TERM: "term-from-the-runner",
      },
    },
  );
  assert.equal(result.code, 1);
  const start = readRecord(record).find((line) => line.event === "start")!;
  const env = start.env as Record<string, string>;
  assert.equal(env.RUNNER_PLANTED_TOKEN, undefined);
  assert.equal(env.NO_COLOR, undefined);
  assert.equal(env.LC_TEST, "c");
  assert.equal(env.FIXTURE_SECRET, "envjson-secret-value-123");
  // env-json lies over the inherited environment, allow-listed names included.
  assert.equal(env.TERM, "term-from-env-json");
  assert.ok(env.PATH);
  const failed = parseJsonLines(result.stdout).at(-1)!;
  assert.equal((failed.data as { code: string }).code, "acp.process_exited");
  assert.match(
    String((failed.data as { stderr_tail: string }).stderr_tail),
    /FIXTURE_SECRET_MARKER=\[REDACTED\]/,
  );
  for (const secret of ["envjson-secret-value-123", "runner-env-secret-456"]) {
    assert.ok(!result.stdout.includes(secret), "secret in events");
    assert.ok(!result.stderr.includes(secret), "secret in logs");
  }
  const store = await openStore({ dataDir });
  try {
    const [run] = await store.listRuns({ limit: 1 });
    const stored = JSON.stringify([run, await store.getEvents(run.runId)]);
    assert.ok(stored.includes("acp.process_exited"));
    for (
      const secret of ["envjson-secret-value-123", "runner-env-secret-456"]
    ) {
      assert.ok(!stored.includes(secret), "secret in the stored run");
    }
  } finally {
    await store.close();
  }
});

Deno.test("a runner variable with a secret-looking name is redacted from the agent's answer; a harmless one is not", async () => {
  const dataDir = tempDir();
  const said = "token runner-env-secret-456 colour runner-env-plain-789";
  const result = await runCli(
    fixtureRunArgsIn(dataDir, ["--text", `'${said}'`], "--json", "hi"),
    {
      env: {
        RUNNER_PLANTED_TOKEN: "runner-env-secret-456",
        RUNNER_PLANTED_COLOUR: "runner-env-plain-789",
      },
    },
  );
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout);
  assert.equal(events.at(-1)!.type, "run.completed");
  const completed = events.findLast((e) => e.type === "message.completed")!;
  assert.deepEqual((completed.data as { message: unknown }).message, {
    role: "assistant",
    content: "token [REDACTED] colour runner-env-plain-789",
  });
  assert.ok(!result.stdout.includes("runner-env-secret-456"));
  const store = await openStore({ dataDir });
  try {
    const [run] = await store.listRuns({ limit: 1 });
    const events = await store.getEvents(run.runId);
    assert.ok(events.length > 0);
    assert.ok(
      !JSON.stringify(events).includes(
        "runner-env-secret-456",
      ),
      "secret in the stored events",
    );
  } finally {
    await store.close();
  }
});

Deno.test("short env-json values under harmless names are not redacted from the answer", async () => {
  const result = await runCli(
    fixtureRunArgsIn(
      tempDir(),
      [],
      "--env-json",
      JSON.stringify({ MODE: "echo" }),
      "hello world",
    ),
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout, "echo: hello world (turn 1)\n");
});
