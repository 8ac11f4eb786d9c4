/**
 * The sandbox from the host's side: the files of `/etc` it must hide from a
 * confined agent (`/etc/shadow`, `/etc/gshadow`, `/etc/sudoers` and the SSH
 * host keys) show nothing of their content inside it (empty, or not to be opened), while the rest of `/etc` is there.
 * The runner runs these tests as root, so without the masks the agent could
 * read them. These tests need bwrap and fail (never skip) without it.
 *
 * @module
 */

import assert from "node:assert/strict";
import { harness, runCompleted } from "../engine_helpers.ts";
import { reachLines, sandboxConfig, sandboxWorld } from "../sandbox_helpers.ts";

/** The host files the sandbox hides that exist on this machine. */
function hiddenHostFiles(): string[] {
  const files = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"];
  try {
    for (const entry of Deno.readDirSync("/etc/ssh")) {
      if (/^ssh_host_.*_key$/.test(entry.name)) {
        files.push(`/etc/ssh/${entry.name}`);
      }
    }
  } catch { /* no sshd here */ }
  return files.filter((file) => {
    try {
      return Deno.statSync(file).size > 0;
    } catch {
      return false;
    }
  });
}

Deno.test("sandbox=confined: /etc/shadow and the SSH host keys show nothing of the host's; /etc itself is there", async () => {
  const hidden = hiddenHostFiles();
  assert.ok(hidden.includes("/etc/shadow"), "this machine has /etc/shadow");
  assert.ok(
    hidden.some((file) => file.startsWith("/etc/ssh/ssh_host_")),
    "this machine has SSH host keys (openssh-server)",
  );
  const world = sandboxWorld();
  const h = harness({ environment: world.environment });
  try {
    const config = sandboxConfig(world, [
      ...hidden.flatMap((file) => ["--try-read", file]),
      "--try-read",
      "/etc/hostname",
    ], { "langbot-assets-enabled": false });
    const log = await runCompleted(h.manager, {
      input: { text: "hi" },
      config,
    });
    const lines = reachLines(log.messages()[0]);
    for (const file of hidden) {
      const seen = lines[`try-read ${file}`];
      // The mask (/dev/null) reads as empty or cannot be opened: either way
      // nothing of the host's file.
      // (The message never quotes what was read: it could be a host key.)
      assert.ok(/^(ok $|error )/.test(seen), `${file} was read in the sandbox`);
      const firstLine = Deno.readTextFileSync(file).split("\n")[0];
      assert.ok(!seen.includes(firstLine), `${file} was read in the sandbox`);
    }
    assert.match(lines["try-read /etc/hostname"], /^ok \S/);
  } finally {
    await h.close();
  }
});
