/**
 * `terminal/create`'s refused variables, every one of them: each name
 * `docs/permissions.md` lists (read from the page, with a member of each
 * `*` family) is refused on its own, whatever else the request sets, and
 * through `runner run` a command asking for one never starts; what is not a
 * variable name is refused too; the line the rules decide on is the whole
 * command with its variables; a program is found on the agent's `PATH`
 * only; and a program named by its path meets its bare name's reject rules.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import type { PermissionRule } from "../../lib/config.ts";
import { checkCommand } from "../../lib/run/terminal_command.ts";
import {
  agentCommand,
  clientTerminalRunArgs,
  parseJsonLines,
  ROOT,
  runCli,
  tempDir,
} from "../helpers.ts";
import { ruleDeciding } from "../security/argv_checks.ts";

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

function refusal(
  env: { name: string; value: string }[] | undefined,
  command = "true",
): unknown {
  try {
    checkCommand(
      { sessionId: "s", command, args: [], env },
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
  const result = await runCli(
    clientTerminalRunArgs(agentCommand(flags), workspace),
  );
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

Deno.test("terminal/create refuses what is not a variable name, and names every refused entry", () => {
  for (const name of ["", "=X", "X=", "A=B", "X\0Y"]) {
    const error = refusal([{ name, value: "v" }]);
    assert.ok(error instanceof acp.RequestError, JSON.stringify(name));
    assert.deepEqual(error.data, { env: [name] });
  }
  const both = refusal([
    { name: "LD_PRELOAD", value: "x" },
    { name: "GCONV_PATH", value: "y" },
  ]);
  assert.ok(both instanceof acp.RequestError);
  assert.match(both.message, /may not set LD_PRELOAD, GCONV_PATH:/);
  assert.equal(refusal(undefined), undefined, "no env at all is fine");
});

Deno.test("the line the rules decide on is the command with its variables and arguments, as sent", () => {
  const cwd = tempDir();
  const bare = checkCommand(
    { sessionId: "s", command: "true" },
    AGENT_PATH,
    cwd,
  );
  assert.equal(bare.title, "true");
  assert.deepEqual(bare.args, []);
  assert.deepEqual(bare.env, []);
  const full = checkCommand(
    {
      sessionId: "s",
      command: "true",
      args: ["a b", "c"],
      env: [{ name: "FOO", value: "bar" }, { name: "MODE", value: "x y" }],
    },
    AGENT_PATH,
    cwd,
  );
  assert.equal(full.title, "FOO=bar MODE=x y true a b c");
});

Deno.test("a program is found on the agent's PATH only: a request's own PATH, or a missing program, is refused with the program named", () => {
  const dir = tempDir();
  Deno.writeTextFileSync(join(dir, "only-here-Qx7"), "#!/bin/sh\n");
  Deno.chmodSync(join(dir, "only-here-Qx7"), 0o755);
  for (
    const env of [undefined, [{ name: "PATH", value: dir }]]
  ) {
    const error = refusal(env, "only-here-Qx7");
    assert.ok(error instanceof acp.RequestError);
    assert.equal(error.code, -32602);
    assert.deepEqual(error.data, { command: "only-here-Qx7" });
    assert.match(error.message, /not found on the agent's PATH/);
  }
  const found = checkCommand(
    { sessionId: "s", command: "only-here-Qx7" },
    `${dir}:${AGENT_PATH}`,
    tempDir(),
  );
  assert.equal(found.program, join(dir, "only-here-Qx7"));
});

Deno.test("a program named by its path meets its bare name's reject rules; a copy elsewhere does not", () => {
  const cwd = tempDir();
  const touch = new Deno.Command("sh", {
    args: ["-c", "command -v touch"],
    stdout: "piped",
  }).outputSync();
  const path = new TextDecoder().decode(touch.stdout).trim();
  assert.ok(path.startsWith("/"), "touch is on PATH");
  const decide = (
    command: string,
    rules: { title: string; decision: string }[],
    args = ["x"],
  ) =>
    ruleDeciding(rules as PermissionRule[], { command, args }, { cwd })
      ?.decision;
  const reject = [{ title: "touch *", decision: "reject" }];
  assert.equal(decide("touch", reject), "reject_once");
  assert.equal(decide(path, reject), "reject_once", "by its path");
  // A copy elsewhere is another program: the bare name's rules are not its.
  const copy = join(cwd, "touch");
  Deno.copyFileSync(path, copy);
  assert.equal(decide(copy, reject), undefined);
  assert.equal(decide("./touch", reject), undefined);
  assert.equal(decide("/nonexistent/touch", reject), undefined);
  // A title read as a line (a glob across words) meets the path's bare line.
  const line = [{ title: "touch *by", decision: "reject" }];
  assert.equal(decide("touch", line, ["a", "by"]), "reject_once");
  assert.equal(decide(path, line, ["a", "by"]), "reject_once", "by its path");
  assert.equal(decide(copy, line, ["a", "by"]), undefined);
});
