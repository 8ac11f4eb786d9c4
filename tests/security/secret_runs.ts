/**
 * What the redaction attacks share: an agent that was handed secrets in
 * env-json, run by `runner run --json`, by a `runner serve` whose operator
 * set them, or prompted over `/acp`; and what the user then sees.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { SessionNotification } from "@agentclientprotocol/sdk";
import type { RunEvent } from "../../lib/events.ts";
import {
  initialize,
  newSession,
  openAcpClient,
  promptText,
} from "../acp_client_helpers.ts";
import {
  agentCommand,
  clientTerminalRunArgs,
  type CliResult,
  parseJsonLines,
  runCli,
} from "../helpers.ts";
import {
  type ServeProcess,
  tempDir,
  withServe,
} from "../serve_test_helpers.ts";

/** A `runner run --json` of `acpCommand`, its output and its events. */
export interface SecretRun {
  result: CliResult;
  events: RunEvent[];
}

/** `runner run custom --json` of `acpCommand` with `env` as env-json (and `extra` flags). */
export async function runWithSecrets(
  env: Record<string, string>,
  acpCommand: string,
  extra: string[] = [],
): Promise<SecretRun> {
  const result = await runCli([
    "run",
    "custom",
    ...["--acp-command", acpCommand],
    ...["--workspace", join(await tempDir(), "ws")],
    ...["--env-json", JSON.stringify(env)],
    ...extra,
    "--json",
    "hi",
  ]);
  return {
    result,
    events: parseJsonLines(result.stdout) as unknown as RunEvent[],
  };
}

/** The `run.failed` event of a run that must have failed. */
export function failedEvent({ result, events }: SecretRun): RunEvent {
  assert.notEqual(result.code, 0);
  const failed = events.find((event) => event.type === "run.failed");
  assert.ok(failed, result.stdout.slice(0, 500));
  return failed;
}

/** A `runner serve` whose operator target is any custom command, with `env` as its env-json. */
export async function withSecretServe(
  env: Record<string, string>,
  body: (serve: ServeProcess) => Promise<void>,
): Promise<void> {
  await withServe({
    args: [
      ...["--allow-custom-commands", "--provider", "custom"],
      ...["--workspace", await tempDir()],
      ...["--env-json", JSON.stringify(env)],
    ],
  }, body);
}

/** One prompt over `/acp` to `acpCommand`: what the editor got, and its session. */
export async function acpPrompt(
  serve: ServeProcess,
  options: { acpCommand: string; profile?: "http" | "websocket" },
): Promise<{ updates: SessionNotification[]; sessionId: string }> {
  const editor = openAcpClient({
    url: serve.url,
    token: serve.token,
    profile: options.profile ?? "http",
    query: { "acp-command": options.acpCommand },
  });
  try {
    await initialize(editor);
    const sessionId = await newSession(editor);
    const answer = await promptText(editor, sessionId, "hi");
    assert.equal(answer.stopReason, "end_turn");
    return { updates: editor.updates, sessionId };
  } finally {
    editor.close();
  }
}

/**
 * `runner run` of an agent that runs `terminal` (a client terminal) with
 * `secret` in its env-json: the terminal's output as `terminal.output`
 * events carried it, joined.
 */
export async function terminalOutputWithSecret(
  secret: string,
  terminal: Record<string, unknown>,
): Promise<string> {
  const result = await runCli(clientTerminalRunArgs(
    agentCommand(["--terminal", JSON.stringify(terminal)]),
    join(await tempDir(), "ws"),
    ["--env-json", JSON.stringify({ API_TOKEN: secret })],
  ));
  assert.equal(result.code, 0, result.stderr);
  return (parseJsonLines(result.stdout) as unknown as RunEvent[])
    .filter((event) => event.type === "terminal.output")
    .map((event) => String(event.data.output))
    .join("");
}
