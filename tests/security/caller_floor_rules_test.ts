/**
 * The caller floor's rules, key by key, with what the caller reads: a limit
 * may be lowered, never raised past the operator's; a switch the operator
 * left off stays off; a confined operator's runs stay confined, their
 * network no wider. Through `resolveCallerConfig`, what `runner serve` runs
 * on every request (the entrances are in `caller_floor_test.ts`).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import { applyHubFloor, runnerPlaces } from "../../lib/run/caller_floor.ts";
import { resolveCallerConfig } from "../../lib/server/policy.ts";
import { ROOT, tempDir } from "../helpers.ts";
import { type CallerRefusal, callerRefusal } from "../caller_floor_helpers.ts";

const WORKSPACE = tempDir("floor-rules-ws-");

function refusal(
  operator: Record<string, unknown>,
  caller: Record<string, unknown>,
  dataDir?: string,
): CallerRefusal | undefined {
  return callerRefusal(operator, caller, { workspace: WORKSPACE, dataDir });
}

Deno.test("every capped limit: lower or the same is taken, one more is refused naming the server's limit", () => {
  for (
    const [key, limit] of [
      ["max-message-mb", 5],
      ["max-attachment-mb", 7],
      ["max-prompt-mb", 9],
      ["terminal-output-bytes", 4096],
      ["terminal-timeout", 60],
    ] as const
  ) {
    const operator = { [key]: limit };
    assert.equal(refusal(operator, { [key]: limit }), undefined, key);
    assert.equal(refusal(operator, { [key]: limit - 1 }), undefined, key);
    assert.equal(refusal(operator, {}), undefined, key);
    assert.deepEqual(refusal(operator, { [key]: limit + 1 }), {
      code: "config.invalid",
      key,
      message:
        `${key}: at most ${limit} per request (the server's limit; the operator can raise it with runner serve --${key}).`,
    }, key);
  }
});

Deno.test("fs-read, fs-write and client-terminals: a caller may turn them off, never on", () => {
  for (
    const [key, why] of [
      ["fs-read", "the runner serves the agent's file reads itself"],
      ["fs-write", "the runner writes the agent's files itself"],
      [
        "client-terminals",
        "the agent's commands would run on the runner's machine",
      ],
    ]
  ) {
    assert.deepEqual(refusal({ [key]: false }, { [key]: true }), {
      code: "http.forbidden",
      key,
      message:
        `${key}: the operator has not turned ${key} on (runner serve --${key} true; ${why}); a request may turn it off, never on.`,
    }, key);
    assert.equal(refusal({ [key]: false }, { [key]: false }), undefined, key);
    assert.equal(refusal({ [key]: true }, { [key]: true }), undefined, key);
    assert.equal(refusal({ [key]: true }, { [key]: false }), undefined, key);
  }
});

Deno.test("under a confined operator a caller may confine more, never less: no sandbox off, no wider network", () => {
  const networks = ["none", "full", "host"];
  for (const [floor, own] of networks.entries()) {
    const operator = {
      sandbox: "confined",
      "sandbox-network": own,
      "langbot-assets-enabled": false,
    };
    const message =
      `the operator confines every run (sandbox=confined, sandbox-network=${own}); a request may confine its run more, never less.`;
    assert.deepEqual(refusal(operator, { sandbox: "off" }), {
      code: "http.forbidden",
      key: "sandbox",
      message: `sandbox: ${message}`,
    }, own);
    for (const [asked, network] of networks.entries()) {
      const got = refusal(operator, { "sandbox-network": network });
      if (asked <= floor) {
        assert.equal(got, undefined, `${own} ← ${network}`);
      } else {
        assert.deepEqual(got, {
          code: "http.forbidden",
          key: "sandbox-network",
          message: `sandbox-network: ${message}`,
        }, `${own} ← ${network}`);
      }
    }
  }
  // An operator who does not confine leaves the choice to the caller.
  assert.equal(refusal({ sandbox: "off" }, { sandbox: "off" }), undefined);
});

Deno.test("a caller's workspace: what each refusal says, and the real path the run gets", () => {
  const roots = tempDir("floor-roots-");
  const inside = join(roots, "conversation-1");
  Deno.mkdirSync(inside);
  const link = join(tempDir("floor-links-"), "to-inside");
  Deno.symlinkSync(inside, link);
  const outside = tempDir("floor-outside-");
  const rooted = { "workspace-roots": roots };
  const forbidden = (key: string, message: string) => ({
    code: "http.forbidden",
    key,
    message: `${key}: ${message}`,
  });
  assert.deepEqual(
    refusal(rooted, { workspace: `${inside}/../conversation-1` }),
    forbidden("workspace", "must not contain a .. segment."),
  );
  assert.deepEqual(
    refusal(rooted, { workspace: outside }),
    forbidden(
      "workspace",
      `${outside} is not under the operator's workspace roots; choose a directory under ${roots} (the operator sets them with --workspace-roots).`,
    ),
  );
  assert.deepEqual(
    refusal({ sandbox: "confined", workspace: undefined }, {
      workspace: inside,
    }),
    forbidden(
      "workspace",
      "the operator confines runs (sandbox=confined) and set no workspace-roots, so a request may not choose its workspace; the operator can allow directories with --workspace-roots.",
    ),
  );
  const dataDir = tempDir("floor-data-");
  for (
    const [workspace, what] of [
      ["/", "/"],
      [Deno.env.get("HOME")!, "the runner's home"],
      [dataDir, "the runner's data dir"],
      [join(dataDir, "runs"), "the runner's data dir"],
      [Deno.execPath(), "the runner's own files"],
    ]
  ) {
    assert.deepEqual(
      refusal({ "workspace-roots": "/" }, { workspace }, dataDir),
      forbidden(
        "workspace",
        `a request may not run an agent in ${what} or a directory that holds it; choose a directory under the operator's workspace-roots.`,
      ),
      workspace,
    );
  }
  // Through a link, the run gets the real directory that was checked.
  const config = resolveCallerConfig({
    allowCustomCommands: false,
    allowEnvNames: [],
    runDefaults: { provider: "codex", workspace: inside },
  }, { workspace: link });
  assert.equal(config.workspace, inside);
});

Deno.test("a caller's session cwd: no .. and nothing outside the run's workspace, and the run gets its real path", () => {
  const workspace = tempDir("floor-session-");
  const sub = join(workspace, "sub");
  Deno.mkdirSync(sub);
  const link = join(workspace, "to-sub");
  Deno.symlinkSync(sub, link);
  const outside = tempDir("floor-outside-");
  const operator = { workspace };
  assert.deepEqual(
    refusal(operator, { "session-cwd": `${sub}/..` }),
    {
      code: "http.forbidden",
      key: "session-cwd",
      message: "session-cwd: must not contain a .. segment.",
    },
  );
  assert.deepEqual(
    refusal(operator, { "session-cwd": outside }),
    {
      code: "http.forbidden",
      key: "session-cwd",
      message:
        `session-cwd: ${outside} is outside the run's workspace ${workspace}; a request may only choose a directory inside it.`,
    },
  );
  const config = resolveCallerConfig({
    allowCustomCommands: false,
    allowEnvNames: [],
    runDefaults: { provider: "codex", ...operator },
  }, { "session-cwd": link });
  assert.equal(config.sessionCwd, sub);
  assert.equal(config.workspace, workspace);
});

Deno.test("a hub is held to the daemon's floor: its workspace outside the daemon's roots is refused, inside it gets the real path", () => {
  const roots = tempDir("hub-roots-");
  const inside = join(roots, "job-1");
  Deno.mkdirSync(inside);
  const link = join(tempDir("hub-links-"), "to-job");
  Deno.symlinkSync(inside, link);
  const outside = tempDir("hub-outside-");
  const operator = parseRunConfig({
    provider: "codex",
    workspace: inside,
    "workspace-roots": roots,
  });
  const floor = (workspace: string) =>
    applyHubFloor({
      operator,
      caller: { workspace },
      // As a daemon maps run.start: the session starts in the workspace.
      resolved: parseRunConfig({
        provider: "codex",
        workspace,
        "session-cwd": workspace,
      }),
      places: runnerPlaces({}),
    });
  assert.throws(
    () => floor(outside),
    (error) =>
      error instanceof RunnerError && error.code === "http.forbidden" &&
      error.detail?.key === "workspace",
  );
  const floored = floor(link);
  assert.equal(floored.workspace, inside);
  assert.equal(floored.sessionCwd, inside, "the session too starts there");
});

Deno.test("without workspace-roots the operator's workspace is the root; with neither, an unconfined operator lets a caller choose", () => {
  const own = tempDir("floor-own-");
  const inside = join(own, "sub");
  Deno.mkdirSync(inside);
  const outside = tempDir("floor-elsewhere-");
  assert.equal(refusal({ workspace: own }, { workspace: inside }), undefined);
  assert.equal(
    refusal({ workspace: own }, { workspace: outside })?.key,
    "workspace",
  );
  assert.equal(
    refusal({ workspace: undefined }, { workspace: outside }),
    undefined,
  );
});

Deno.test("a workspace path that cannot be resolved (through a file) is refused, saying so and what to choose", () => {
  const roots = tempDir("floor-unresolved-");
  const file = join(roots, "notes.txt");
  Deno.writeTextFileSync(file, "a file, not a directory\n");
  const workspace = join(file, "sub");
  assert.deepEqual(refusal({ "workspace-roots": roots }, { workspace }), {
    code: "http.forbidden",
    key: "workspace",
    message:
      `workspace: ${workspace} cannot be resolved on the runner's machine (NotADirectory); choose a directory under the operator's workspace-roots.`,
  });
});

Deno.test("the operator's own workspace is the operator's choice: a caller who does not choose one is not held to the caller's bounds", () => {
  const dataDir = tempDir("floor-own-data-");
  // The operator runs agents in its data dir and the caller only sets a
  // timeout: the data dir guard is for a caller's choice, not the operator's.
  for (const caller of [{}, { timeout: 30 }]) {
    assert.equal(
      refusal({ workspace: dataDir }, caller, dataDir),
      undefined,
      JSON.stringify(caller),
    );
  }
  const config = resolveCallerConfig({
    allowCustomCommands: false,
    allowEnvNames: [],
    dataDir,
    runDefaults: { provider: "codex", workspace: dataDir },
  }, {});
  assert.equal(config.workspace, dataDir);
});

Deno.test("the operator's session cwd stands: a caller who sends none runs there, a workspace that holds it keeps it, one that does not is refused", () => {
  const roots = tempDir("floor-own-cwd-");
  const project = join(roots, "project");
  const workspace = join(project, "app");
  const sessionCwd = join(workspace, "src");
  Deno.mkdirSync(sessionCwd, { recursive: true });
  const other = join(roots, "other");
  Deno.mkdirSync(other);
  const serve = {
    allowCustomCommands: false,
    allowEnvNames: [],
    runDefaults: {
      provider: "codex",
      workspace,
      "session-cwd": sessionCwd,
      "workspace-roots": roots,
    },
  };
  for (const caller of [{}, { timeout: 30 }]) {
    const config = resolveCallerConfig(serve, caller);
    assert.equal(config.workspace, workspace, JSON.stringify(caller));
    assert.equal(config.sessionCwd, sessionCwd, JSON.stringify(caller));
  }
  const wider = resolveCallerConfig(serve, { workspace: project });
  assert.equal(wider.workspace, project);
  assert.equal(wider.sessionCwd, sessionCwd, "not moved to the workspace");
  assert.deepEqual(
    refusal(serve.runDefaults, { workspace: other }),
    {
      code: "http.forbidden",
      key: "session-cwd",
      message:
        `session-cwd: ${sessionCwd} is outside the run's workspace ${other}; a request may only choose a directory inside it.`,
    },
  );
});

Deno.test("a caller's session options are judged on what it changes, never on the operator's own values it leaves", () => {
  // The operator's default mode is one callers may not pick themselves.
  const operator = {
    "session-config-json": { mode: "yolo", effort: "low" },
    "caller-session-config-keys": "mode,effort",
    "caller-modes": "plan",
  };
  for (
    const asked of [{}, { effort: "high" }, { mode: "plan" }, { mode: "yolo" }]
  ) {
    assert.equal(
      refusal(operator, { "session-config-json": asked }),
      undefined,
      JSON.stringify(asked),
    );
  }
  assert.deepEqual(
    refusal(operator, { "session-config-json": { mode: "auto" } })?.key,
    "session-config-json",
  );
});

/** `runnerPlaces({}).own` as a runner whose main module is `main` sees it. */
async function ownFilesOf(main: string, args: string[]): Promise<string[]> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", main, ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.ok(output.success, stderr);
  return JSON.parse(new TextDecoder().decode(output.stdout));
}

Deno.test("a runner's own files: its executable, and its source tree only when that is a real directory", async () => {
  const module = new URL("../../lib/run/caller_floor.ts", import.meta.url).href;
  const print =
    "const { runnerPlaces } = await import(Deno.args[0]); console.log(JSON.stringify(runnerPlaces({}).own));";
  // Run from source: the tree of its main module is protected too.
  const tree = tempDir("floor-main-");
  Deno.writeTextFileSync(join(tree, "main.ts"), print);
  assert.deepEqual(await ownFilesOf(join(tree, "main.ts"), [module]), [
    Deno.execPath(),
    tree,
  ]);
  // A main module whose directory is gone (a compiled runner's is virtual).
  const gone = tempDir("floor-main-gone-");
  Deno.writeTextFileSync(
    join(gone, "main.ts"),
    `Deno.removeSync(new URL(".", import.meta.url), { recursive: true }); ${print}`,
  );
  assert.deepEqual(await ownFilesOf(join(gone, "main.ts"), [module]), [
    Deno.execPath(),
  ]);
  // A main module that is no file at all.
  assert.deepEqual(
    await ownFilesOf(
      `data:application/typescript,${encodeURIComponent(print)}`,
      [module],
    ),
    [Deno.execPath()],
  );
});
