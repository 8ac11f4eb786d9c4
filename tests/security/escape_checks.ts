/**
 * The sandbox escape attack (`tests/fixtures/attack_escape.ts`) as every
 * entrance tries it: the attack on a world (the masked files, a read-only
 * bind, the handle of a host secret), the fixture flags that run it in the
 * agent and in a client terminal, and what must hold afterwards (every call
 * failed, the host untouched).
 *
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { sandboxAvailability } from "../../lib/agent/sandbox.ts";
import { userNamespaceWorks } from "../../lib/agent/sandbox_hardening.ts";
import { ESCAPE_SCRIPT, type EscapeAttack } from "../fixtures/attack_escape.ts";
import { tempDir } from "../helpers.ts";
import { attackLines, terminalReports } from "./entrances.ts";

/** The handle of a host file (`name_to_handle_at`, which needs no privilege). */
export function fileHandle(path: string): { type: number; hex: string } {
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
export function maskedFiles(): string[] {
  const keys = [...Deno.readDirSync("/etc/ssh")]
    .filter((entry) => /^ssh_host_.*_key$/.test(entry.name))
    .map((entry) => join("/etc/ssh", entry.name));
  return ["/etc/shadow", ...keys];
}

/**
 * An attack on the masked files, on `readOnlyDir` (default: a fresh
 * directory, to be bound read-only) and on the handle of `homeSecret`.
 */
export function escapeAttack(
  homeSecret: string,
  readOnlyDir: string = tempDir("read-only-"),
): EscapeAttack & { readOnlyDir: string } {
  return {
    masked: maskedFiles(),
    readOnlyDir,
    handle: fileHandle(homeSecret),
  };
}

/** A client terminal (`--terminal`) that runs the same attack as a command. */
export function escapeTerminal(spec: EscapeAttack): {
  command: string;
  args: string[];
} {
  return {
    command: "/usr/bin/python3",
    args: ["-c", ESCAPE_SCRIPT, JSON.stringify(spec)],
  };
}

/** The fixture flags that attack in the agent and in its first client terminal. */
export function escapeFlags(spec: EscapeAttack): string[] {
  return [
    ...["--attack-escape", JSON.stringify(spec)],
    ...["--terminal", JSON.stringify(escapeTerminal(spec))],
  ];
}

/** The attack lines of a reply's first client terminal (`terminal 0`). */
export function terminalAttackLines(reply: string): Record<string, string> {
  const report = terminalReports(reply)[0];
  assert.ok(report, `the terminal ran: ${reply.slice(0, 2000)}`);
  return attackLines(String(report.output));
}

/** Whether `bwrap` can start `true` in a user namespace that cannot make another. */
function userNamespaceAllowed(bwrap: string): boolean {
  return new Deno.Command(bwrap, {
    args: [
      ...["--unshare-user", "--disable-userns", "--unshare-pid"],
      ...["--ro-bind", "/", "/", "--", "true"],
    ],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).outputSync().success;
}

/** Asserts every line of an escape attack says it failed, and the host is untouched. */
export function assertEscapeFailed(
  lines: Record<string, string>,
  spec: EscapeAttack,
  homeSecret: string,
): void {
  const bwrap = sandboxAvailability().bwrap!;
  assert.ok(lines.caps, `the attack ran: ${JSON.stringify(lines)}`);
  assert.match(lines.caps, /CapEff=0000000000000000 CapPrm=0000000000000000 /);
  if (userNamespaceWorks(bwrap)) {
    assert.match(lines.caps, /CapBnd=0000000000000000 /);
  }
  // Where bubblewrap can make a user namespace here (asked directly, not
  // through the code under test), the agent is in one of its own: its uid
  // map is not the host's whole range.
  if (userNamespaceAllowed(bwrap)) {
    assert.ok(lines["uid-map"], "the uid map was read");
    assert.doesNotMatch(lines["uid-map"], / 4294967295$/, "its own userns");
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
  assert.ok(
    !existsSync(join(spec.readOnlyDir!, "escaped.txt")),
    "the read-only bind is untouched on the host",
  );
}
