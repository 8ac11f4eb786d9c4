/**
 * `terminal/create`'s refused variables, every one of them: each name
 * `docs/permissions.md` lists (read from the page, with a member of each
 * `*` family) is refused on its own, whatever else the request sets, and
 * through `runner run` a command asking for one never starts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { checkCommand } from "../../lib/run/terminal_command.ts";
import {
  agentCommand,
  parseJsonLines,
  ROOT,
  runCli,
  tempDir,
} from "../helpers.ts";

const AGENT_PATH = Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin";

/** The refused names the docs list; a `*` family stands as two members. */
function documentedNames(): string[] {
  const page = Deno.readTextFileSync(join(ROOT, "docs", "permissions.md"));
  const item = page.slice(page.indexOf("- **Environment.**"));
  const list = item.slice(0, item.indexOf("are refused"));
  const names = [...list.matchAll(/`([A-Z_]+\*?)`/g)].map((m) => m[1]);
  assert.ok(names.length >= 13, `${names.length} names in the docs`);
  return names.flatMap((name) =>
    name.endsWith("*")
      ? [`${name.slice(0, -1)}PRELOAD`, `${name.slice(0, -1)}INSERT_LIBRARIES`]
      : [name]
  );
}

function refusal(env: { name: string; value: string }[]): unknown {
  try {
    checkCommand(
      { sessionId: "s", command: "true", args: [], env },
      AGENT_PATH,
      tempDir(),
    );
    return undefined;
  } catch (error) {
    return error;
  }
}

Deno.test("terminal/create refuses every loader variable the docs list, each alone and each behind an ordinary one", () => {
  const names = documentedNames();
  for (const name of ["LD_PRELOAD", "DYLD_INSERT_LIBRARIES", "GCONV_PATH"]) {
    assert.ok(names.includes(name), `the docs list ${name}`);
  }
  for (const name of names) {
    for (
      const env of [
        [{ name, value: "/tmp/x" }],
        [{ name: "FROM_CREATE", value: "ok" }, { name, value: "/tmp/x" }],
      ]
    ) {
      const error = refusal(env);
      assert.ok(error instanceof acp.RequestError, `${name} refused`);
      assert.equal(error.code, -32602, `${name}: invalid params`);
      assert.match(error.message, new RegExp(`may not set ${name}\\b`));
      assert.deepEqual(error.data, { env: [name] }, name);
    }
  }
  assert.equal(refusal([{ name: "FROM_CREATE", value: "ok" }]), undefined);
});

Deno.test("runner run: a command asking for GCONV_PATH, DYLD_INSERT_LIBRARIES or LOCPATH never starts", async () => {
  const workspace = tempDir();
  const names = ["GCONV_PATH", "DYLD_INSERT_LIBRARIES", "LOCPATH"];
  const flags = names.flatMap((name) => [
    "--terminal",
    JSON.stringify({
      command: "sh",
      args: ["-c", `touch ran-${name}`],
      env: { [name]: workspace },
    }),
  ]);
  const result = await runCli([
    "run",
    "custom",
    "--acp-command",
    agentCommand(flags),
    "--workspace",
    workspace,
    "--client-terminals",
    "true",
    "--langbot-assets-enabled",
    "false",
    "--json",
    "go",
  ]);
  assert.equal(result.code, 0, result.stderr);
  const events = parseJsonLines(result.stdout) as {
    type: string;
    data: Record<string, unknown>;
  }[];
  assert.ok(!events.some((e) => e.type === "terminal.started"));
  const completed = events.find((e) => e.type === "message.completed")!;
  const text = String((completed.data.message as { content: string }).content);
  for (const [index, name] of names.entries()) {
    assert.match(
      text,
      new RegExp(`^terminal ${index}: .*may not set ${name}`, "m"),
    );
  }
  assert.deepEqual([...Deno.readDirSync(workspace)].map((e) => e.name), []);
});
