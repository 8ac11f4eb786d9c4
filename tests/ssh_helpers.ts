/**
 * A real OpenSSH server on a loopback port with throwaway keys, for the
 * remote-ssh tests, and the run set-up those tests share.
 *
 * @module
 */

import { join } from "node:path";
import { parseRunConfig, type RunConfig } from "../lib/config.ts";
import { type Harness, harness } from "./engine_helpers.ts";
import { fixtureCommand, readRecord, tempDir } from "./helpers.ts";
import { readUntilText } from "./stream_helpers.ts";
export { freePort } from "./helpers.ts";
import { freePort } from "./helpers.ts";

/** A running sshd and the client settings that reach it. */
export interface TestSshd {
  /** The port it listens on (127.0.0.1). */
  port: number;
  /** The client's private key. */
  identityFile: string;
  /** `ssh-extra-options` that trust the throwaway host key. */
  extraOptions: string[];
  /** The `ssh-target`. */
  target: string;
  /** Stops sshd. */
  close(): Promise<void>;
}

/** Where Debian's sshd lives, if installed. */
export const SSHD_PATH = [
  "/usr/sbin/sshd",
  "/usr/local/sbin/sshd",
  "/usr/bin/sshd",
].find(
  (path) => {
    try {
      return Deno.statSync(path).isFile;
    } catch {
      return false;
    }
  },
);

async function run(cmd: string, args: string[]) {
  const result = await new Deno.Command(cmd, {
    args,
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!result.success) {
    throw new Error(
      `${cmd} failed: ${new TextDecoder().decode(result.stderr)}`,
    );
  }
}

/** Options for {@linkcode startSshd}. */
export interface StartSshdOptions {
  /** `AllowTcpForwarding` (default true); false refuses every `ssh -R`. */
  allowTcpForwarding?: boolean;
  /** sshd's `ForceCommand`: every session runs this instead of its command. */
  forceCommand?: string;
}

/** Starts sshd on 127.0.0.1 with fresh host and client keys. */
export async function startSshd(
  options: StartSshdOptions = {},
): Promise<TestSshd> {
  if (!SSHD_PATH) {
    throw new Error("sshd is not installed (apt-get install openssh-server)");
  }
  const dir = tempDir("runner-sshd-");
  const hostKey = join(dir, "host_key");
  const identityFile = join(dir, "client_key");
  await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", hostKey]);
  await run("ssh-keygen", [
    "-q",
    "-t",
    "ed25519",
    "-N",
    "",
    "-f",
    identityFile,
  ]);
  Deno.copyFileSync(`${identityFile}.pub`, join(dir, "authorized_keys"));
  Deno.chmodSync(dir, 0o700);
  await Deno.mkdir("/run/sshd", { recursive: true }).catch(() => {});
  const port = freePort();
  const user = Deno.env.get("USER") ?? "root";
  const config = join(dir, "sshd_config");
  Deno.writeTextFileSync(
    config,
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${hostKey}`,
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      `PidFile ${join(dir, "sshd.pid")}`,
      "StrictModes no",
      "UsePAM no",
      "PermitRootLogin yes",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      `AllowTcpForwarding ${
        options.allowTcpForwarding === false ? "no" : "yes"
      }`,
      "LogLevel INFO",
      ...(options.forceCommand ? [`ForceCommand ${options.forceCommand}`] : []),
      "",
    ].join("\n"),
  );
  const knownHosts = join(dir, "known_hosts");
  const hostPub = Deno.readTextFileSync(`${hostKey}.pub`).trim();
  Deno.writeTextFileSync(knownHosts, `[127.0.0.1]:${port} ${hostPub}\n`);
  const child = new Deno.Command(SSHD_PATH, {
    args: ["-D", "-e", "-f", config],
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const reader = child.stderr.pipeThrough(new TextDecoderStream()).getReader();
  await readUntilText(
    reader,
    "Server listening on 127.0.0.1",
    "sshd did not start",
  );
  const drained = (async () => {
    while (!(await reader.read()).done) { /* keep draining */ }
  })();
  return {
    port,
    identityFile,
    extraOptions: [
      `UserKnownHostsFile=${knownHosts}`,
      "StrictHostKeyChecking=yes",
    ],
    target: `${user}@127.0.0.1`,
    async close() {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
      await child.status;
      // Sessions still open hold sshd's stderr: stop reading instead of
      // waiting for its end.
      await reader.cancel().catch(() => {});
      await drained.catch(() => {});
    },
  };
}

/** The run-config keys that point a `remote-ssh` run at `sshd`. */
export function sshTargetConfig(sshd: TestSshd): Record<string, unknown> {
  return {
    location: "remote-ssh",
    "ssh-target": sshd.target,
    "ssh-port": sshd.port,
    "ssh-identity-file": sshd.identityFile,
    "ssh-extra-options": sshd.extraOptions,
  };
}

/** A run config for the fixture agent with `flags`, over `sshd`, with `extra` keys. */
export function sshFixtureConfig(
  sshd: TestSshd,
  flags: string[],
  extra: Record<string, unknown> = {},
): RunConfig {
  return parseRunConfig({
    provider: "custom",
    "acp-command": fixtureCommand(...flags),
    workspace: join(tempDir(), "remote-ws"),
    ...sshTargetConfig(sshd),
    ...extra,
  });
}

/** What an {@linkcode sshRunTest} body works with. */
export interface SshRun {
  /** The sshd the runs go through. */
  sshd: TestSshd;
  /** A run manager over a fresh store. */
  h: Harness;
}

/**
 * Registers a test, skipped where sshd is not installed, whose body gets a
 * fresh sshd (started with `options`) and run manager; both are closed after.
 */
export function sshRunTest(
  name: string,
  body: (ssh: SshRun) => Promise<void>,
  options: StartSshdOptions = {},
): void {
  Deno.test({
    name,
    ignore: !SSHD_PATH,
    async fn() {
      const sshd = await startSshd(options);
      const h = harness();
      try {
        await body({ sshd, h });
      } finally {
        await h.close();
        await sshd.close();
      }
    },
  });
}

/** The MCP servers the agent was given in its recorded `session/new`. */
export function recordedMcpServers(
  record: string,
): Array<
  { name: string; url: string; headers: Array<{ name: string; value: string }> }
> {
  const session = readRecord(record).find((line) =>
    line.method === "session/new"
  )!;
  return (session.params as {
    mcpServers: ReturnType<typeof recordedMcpServers>;
  }).mcpServers;
}
