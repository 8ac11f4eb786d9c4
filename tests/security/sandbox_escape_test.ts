/**
 * Attacks on the sandbox itself (`docs/sandbox.md`, "Nothing to escape
 * with"): a confined agent that misbehaves on purpose (`--attack-escape`,
 * `tests/fixtures/attack_escape.ts`) looks for capabilities and tries the
 * calls container escapes are made of — `umount` of the masked files, a
 * read-write remount of a read-only bind, `open_by_handle_at` on a host file,
 * the host's keyrings, a nested user namespace — itself and through a client
 * terminal, under a root runner (this suite runs as root) and under an
 * unprivileged one. Everything fails, and the host files stay unread and
 * untouched. Needs bwrap and python3; fails (never skips) without them.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { existsSync } from "node:fs";
import { DENO_RUN_FLAGS } from "../../lib/runtime_permissions.ts";
import { sandboxAvailability } from "../../lib/agent/sandbox.ts";
import { userNamespaceWorks } from "../../lib/agent/sandbox_hardening.ts";
import { quoteCommand } from "../../lib/agent/shell_words.ts";
import { EventLog, harness } from "../engine_helpers.ts";
import { parseJsonLines, ROOT, tempDir } from "../helpers.ts";
import { ESCAPE_SCRIPT, type EscapeAttack } from "../fixtures/attack_escape.ts";
import {
  confinedFixtureCommand,
  DENO_DIR,
  sandboxKeys,
  type SandboxWorld,
  sandboxWorld,
} from "../sandbox_helpers.ts";
import { parseRunConfig } from "../../lib/config.ts";

/** A confined fixture run in `world` whose flags may hold spaces and JSON. */
function attackConfig(
  world: SandboxWorld,
  flags: string[],
  extra: Record<string, unknown>,
) {
  return parseRunConfig({
    ...sandboxKeys(world, [], extra),
    "acp-command": quoteCommand([
      ...confinedFixtureCommand().split(" "),
      ...flags,
    ]),
  });
}

/** The `attack-<what>: outcome` lines of a reply or an output, by `<what>`. */
function attackLines(text: string): Record<string, string> {
  const lines: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const match = /^attack-([^:]+): (.*)$/.exec(line);
    if (match) lines[match[1]] = match[2];
  }
  return lines;
}

/** The handle of a host file (`name_to_handle_at`, which needs no privilege). */
function fileHandle(path: string): { type: number; hex: string } {
  const script = `
import ctypes, json, sys
libc = ctypes.CDLL(None, use_errno=True)
class FileHandle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("f", ctypes.c_ubyte * 128)]
fh = FileHandle(128, 0)
mount_id = ctypes.c_int()
if libc.name_to_handle_at(-100, sys.argv[1].encode(), ctypes.byref(fh), ctypes.byref(mount_id), 0) != 0:
    sys.exit("name_to_handle_at failed")
print(json.dumps({"type": fh.type, "hex": bytes(fh.f[:fh.bytes]).hex()}))
`;
  const output = new Deno.Command("/usr/bin/python3", {
    args: ["-c", script, path],
    stdout: "piped",
  }).outputSync();
  assert.ok(output.success, "the host file has a handle");
  return JSON.parse(new TextDecoder().decode(output.stdout));
}

/** The SSH host keys and other masked files that exist here. */
function maskedFiles(): string[] {
  const keys = [...Deno.readDirSync("/etc/ssh")]
    .filter((entry) => /^ssh_host_.*_key$/.test(entry.name))
    .map((entry) => join("/etc/ssh", entry.name));
  return ["/etc/shadow", ...keys];
}

/** An attack on `world`: a read-only bind with nothing in it, and the handle of `$HOME`'s secret. */
function escapeAttack(world: SandboxWorld) {
  const readOnlyDir = tempDir("read-only-");
  const spec: EscapeAttack = {
    masked: maskedFiles(),
    readOnlyDir,
    handle: fileHandle(world.homeSecret),
  };
  return { spec, readOnlyDir };
}

/** Asserts every line of an escape attack says it failed. */
function assertEscapeFailed(
  lines: Record<string, string>,
  spec: EscapeAttack,
  homeSecret: string,
) {
  const bwrap = sandboxAvailability().bwrap!;
  assert.ok(lines.caps, `the attack ran: ${JSON.stringify(lines)}`);
  assert.match(lines.caps, /CapEff=0000000000000000 CapPrm=0000000000000000 /);
  if (userNamespaceWorks(bwrap)) {
    assert.match(lines.caps, /CapBnd=0000000000000000 /);
  }
  for (const path of spec.masked!) {
    assert.equal(lines[`umount ${path}`], "error EPERM", path);
    assert.match(lines[`read ${path}`], /^(error |0 bytes$)/, path);
  }
  assert.equal(lines.remount, "error EPERM");
  assert.equal(lines["mount-setattr"], "error EPERM");
  assert.equal(lines["write-read-only"], "error EROFS");
  assert.equal(lines["open-by-handle"], "error EPERM");
  assert.doesNotMatch(
    JSON.stringify(lines),
    new RegExp(Deno.readTextFileSync(homeSecret).trim()),
  );
  assert.match(lines["nested-userns"], /^error /);
  assert.equal(lines.keyring, "error EPERM", "the host's keyrings");
  assert.equal(lines.script, undefined, "the attack script ran to its end");
  assert.match(lines.caps, /NoNewPrivs=1 Seccomp=2$/, "the seccomp filter");
}

Deno.test("a root runner's confined agent finds no capability, and umount, remount, open_by_handle_at, the keyrings and a nested user namespace all fail", async () => {
  assert.equal(Deno.uid(), 0, "this attack is on a runner started as root");
  const world = sandboxWorld();
  const { spec, readOnlyDir } = escapeAttack(world);
  const h = harness({ environment: world.environment });
  try {
    const config = attackConfig(
      world,
      ["--attack-escape", JSON.stringify(spec)],
      {
        "sandbox-read-paths": [ROOT, DENO_DIR, readOnlyDir],
        "langbot-assets-enabled": false,
      },
    );
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    assert.equal(
      (await run.done).status,
      "completed",
      JSON.stringify(log.events.at(-1)),
    );
    assertEscapeFailed(
      attackLines(log.messages()[0]),
      spec,
      world.homeSecret,
    );
    assert.ok(!existsSync(join(readOnlyDir, "escaped.txt")), "host untouched");
  } finally {
    await h.close();
  }
});

Deno.test("a confined agent's terminal command gets the same: no capability, and every escape call fails", async () => {
  const world = sandboxWorld();
  const { spec, readOnlyDir } = escapeAttack(world);
  const h = harness({ environment: world.environment });
  try {
    const terminal = {
      command: "/usr/bin/python3",
      args: ["-c", ESCAPE_SCRIPT, JSON.stringify(spec)],
    };
    const config = attackConfig(
      world,
      ["--terminal", JSON.stringify(terminal)],
      {
        "sandbox-read-paths": [ROOT, DENO_DIR, readOnlyDir],
        "langbot-assets-enabled": false,
        "client-terminals": true,
      },
    );
    const { run } = await h.manager.start({ input: { text: "hi" }, config });
    const log = new EventLog(run);
    assert.equal(
      (await run.done).status,
      "completed",
      JSON.stringify(log.events.at(-1)),
    );
    const report = /^terminal 0: (.*)$/m.exec(log.messages()[0]);
    assert.ok(report, log.messages()[0]);
    const { output } = JSON.parse(report[1]);
    assertEscapeFailed(attackLines(output), spec, world.homeSecret);
    assert.ok(!existsSync(join(readOnlyDir, "escaped.txt")), "host untouched");
  } finally {
    await h.close();
  }
});

/** `nobody`, who can make user namespaces of its own (and so, unguarded, nest one). */
const NOBODY = { uid: 65534, gid: 65534 };

/** A directory `nobody` owns (its parent, the test's TMPDIR, made passable). */
function nobodysDir(prefix: string): string {
  const dir = tempDir(prefix);
  Deno.chownSync(dir, NOBODY.uid, NOBODY.gid);
  return dir;
}

/** Lets `nobody` pass through the directory that holds the test's temp dirs, for the test's duration. */
function passableTempRoot(): () => void {
  const root = join(tempDir(), "..");
  const mode = Deno.statSync(root).mode! & 0o7777;
  Deno.chmodSync(root, mode | 0o001);
  return () => Deno.chmodSync(root, mode);
}

Deno.test({
  name:
    "an unprivileged runner's confined agent (runner started as nobody) finds the same: no capability, no nested user namespace, every escape call fails",
  // Starting the runner as another user needs root (setpriv).
  ignore: Deno.uid() !== 0,
  async fn() {
    const restore = passableTempRoot();
    try {
      const home = nobodysDir("nobody-home-");
      const homeSecret = join(home, "secret.txt");
      Deno.writeTextFileSync(homeSecret, "nobody's secret\n");
      const readOnlyDir = nobodysDir("nobody-read-only-");
      const denoDir = nobodysDir("nobody-deno-");
      const spec: EscapeAttack = {
        masked: maskedFiles(),
        readOnlyDir,
        handle: fileHandle(homeSecret),
      };
      const agent = quoteCommand([
        Deno.execPath(),
        "run",
        "-A",
        "--node-modules-dir=manual",
        "--config",
        `${ROOT}deno.json`,
        `${ROOT}tests/fixtures/agent.ts`,
        "--attack-escape",
        JSON.stringify(spec),
      ]);
      const output = await new Deno.Command("setpriv", {
        args: [
          `--reuid=${NOBODY.uid}`,
          `--regid=${NOBODY.gid}`,
          "--clear-groups",
          "--",
          Deno.execPath(),
          "run",
          ...DENO_RUN_FLAGS,
          "--node-modules-dir=manual",
          `${ROOT}main.ts`,
          "run",
          "custom",
          "--acp-command",
          agent,
          "--workspace",
          nobodysDir("nobody-ws-"),
          "--sandbox",
          "confined",
          "--sandbox-read-paths",
          `${ROOT},${denoDir},${readOnlyDir}`,
          "--langbot-assets-enabled",
          "false",
          "--json",
          "hi",
        ],
        clearEnv: true,
        env: {
          // Only what nobody may read (root's own tool directories are not).
          PATH: "/usr/local/bin:/usr/bin:/bin",
          HOME: home,
          DENO_DIR: denoDir,
          TMPDIR: nobodysDir("nobody-tmp-"),
          RUNNER_DATA_DIR: nobodysDir("nobody-data-"),
          NO_COLOR: "1",
        },
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stderr = new TextDecoder().decode(output.stderr);
      const stdout = new TextDecoder().decode(output.stdout);
      assert.equal(output.code, 0, stderr + stdout.slice(-2000));
      const events = parseJsonLines(stdout);
      const completed = events.find((e) => e.type === "message.completed") as {
        data: { message: { content: string } };
      };
      const lines = attackLines(completed.data.message.content);
      assertEscapeFailed(lines, spec, homeSecret);
      // Without `--disable-userns` and the filter, nobody could nest one.
      assert.equal(lines["nested-userns"], "error EPERM");
      assert.ok(!existsSync(join(readOnlyDir, "escaped.txt")));
    } finally {
      restore();
    }
  },
});
