/**
 * `auth-method` against the fixture agent that needs a login
 * (`--auth-required`): `runner run` and `runner probe` call `authenticate`
 * with it before the session; a method the agent does not list fails with
 * `acp.unauthenticated` naming the ones it does, before any session call.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  customRunArgs,
  fixtureCommand,
  parseJsonLines,
  readRecord,
  runCli,
  tempDir,
} from "../helpers.ts";

async function runWith(method: string) {
  const record = join(tempDir(), "record.jsonl");
  const result = await runCli(
    customRunArgs(
      fixtureCommand("--auth-required", "--record", record),
      join(tempDir(), "ws"),
      ["--data-dir", tempDir(), "--auth-method", method, "--json", "hi"],
    ),
  );
  const methods = readRecord(record).map((r) => r.method).filter(Boolean);
  return { result, methods, events: parseJsonLines(result.stdout) };
}

Deno.test("runner run --auth-method authenticates before session/new; an unlisted method fails before any session call", async () => {
  const ok = await runWith("fixture-login");
  assert.equal(ok.result.code, 0, ok.result.stdout);
  assert.deepEqual(ok.methods.slice(0, 3), [
    "initialize",
    "authenticate",
    "session/new",
  ]);
  const wrong = await runWith("sso");
  assert.equal(wrong.result.code, 1);
  const failed = wrong.events.at(-1)!;
  assert.equal(failed.type, "run.failed");
  const data = failed.data as Record<string, unknown>;
  assert.equal(data.code, "acp.unauthenticated");
  assert.equal(data.retryable, false);
  assert.match(
    String(data.error),
    /^auth-method: the agent lists no method "sso" \(it lists: fixture-login\)/,
  );
  assert.deepEqual(wrong.methods, ["initialize"]);
});

Deno.test("probe --auth-method makes an agent that needs login ok", async () => {
  const result = await runCli([
    "probe",
    "custom",
    "--acp-command",
    fixtureCommand("--auth-required"),
    "--auth-method",
    "fixture-login",
    "--json",
  ]);
  assert.equal(result.code, 0, result.stdout);
  const report = JSON.parse(result.stdout);
  assert.equal(report.outcome, "ok");
  assert.equal(report.session_ok, true);
});
