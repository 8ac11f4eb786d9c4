/**
 * Test helpers: the fixture agent's command line, the CLI under the runtime
 * permission set, and process-table checks.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { quoteCommand } from "../lib/agent/shell_words.ts";
import { isSecretName } from "../lib/secrets.ts";
import { DENO_RUN_FLAGS } from "../lib/runtime_permissions.ts";
import { STORE_FILE_NAME } from "../lib/store/open.ts";
import { openSqliteStore } from "../lib/store/sqlite/store.ts";
import { asyncRunStore } from "../lib/store/sqlite/sync_adapter.ts";
import type { RunStore } from "../lib/store/types.ts";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * The test process's environment without `RUNNER_*` settings and without
 * variables whose names mark a secret: a runner started with it redacts
 * nothing the machine happens to hold (a CI token would hold back text that
 * starts like it), and the machine's credentials stay out of the runs.
 */
export function plainEnvironment(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(Deno.env.toObject()).filter(([name]) =>
      !name.startsWith("RUNNER_") && !isSecretName(name)
    ),
  );
}

/** The fixture agent's argv: Deno with `denoFlags`, the agent with `flags`. */
export function fixtureArgv(
  flags: string[] = [],
  denoFlags: string[] = [],
): string[] {
  return [
    Deno.execPath(),
    "run",
    "-A",
    ...denoFlags,
    "--config",
    `${ROOT}deno.json`,
    `${ROOT}tests/fixtures/agent.ts`,
    ...flags,
  ];
}

/** The fixture agent's command, as an `acp-command` string. */
export function fixtureCommand(...flags: string[]): string {
  return fixtureArgv(flags).join(" ");
}

/**
 * The fixture agent's command with `flags` quoted, as an `acp-command`
 * string: flags may hold spaces and JSON.
 */
export function agentCommand(flags: string[] = []): string {
  return quoteCommand(fixtureArgv(flags));
}

/** What a CLI invocation printed and how it exited. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Options for {@linkcode runCli}. */
export interface RunCliOptions {
  /** Extra environment for the runner process. */
  env?: Record<string, string>;
}

let emptyRegistry: string | undefined;

/**
 * A `file://` ACP registry with no agents: what the CLI's tests use unless
 * they serve their own, so no test reaches for the official registry.
 */
export function emptyRegistryUrl(): string {
  if (emptyRegistry === undefined) {
    const path = join(tempDir(), "registry.json");
    Deno.writeTextFileSync(path, '{"version":"test","agents":[]}');
    emptyRegistry = `file://${path}`;
  }
  return emptyRegistry;
}

/** Runs `main.ts` with exactly the binary's permission flags. */
export async function runCli(
  args: string[],
  options: RunCliOptions = {},
): Promise<CliResult> {
  const output = await cliCommand(args, options, "inherit").output();
  return {
    code: output.code,
    stdout: new TextDecoder().decode(output.stdout),
    stderr: new TextDecoder().decode(output.stderr),
  };
}

/**
 * Spawns `command` (its stdin, stdout and stderr piped), writes `input` to
 * its stdin and closes it; what it printed and how it exited.
 */
export async function outputWithInput(
  command: Deno.Command,
  input: string,
): Promise<CliResult> {
  const child = command.spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(input));
  await writer.close();
  const output = await child.output();
  return {
    code: output.code,
    stdout: new TextDecoder().decode(output.stdout),
    stderr: new TextDecoder().decode(output.stderr),
  };
}

/** Runs `main.ts` (see {@linkcode runCli}), fails unless it exits 0, and returns the JSON lines it printed. */
export async function runJsonEvents(
  args: string[],
  options: RunCliOptions = {},
): Promise<Record<string, unknown>[]> {
  const result = await runCli(args, options);
  assert.equal(result.code, 0, result.stderr);
  return parseJsonLines(result.stdout);
}

/** Starts `main.ts` with the binary's permission flags, piped stdio. */
export function spawnCli(
  args: string[],
  options: RunCliOptions = {},
): Deno.ChildProcess {
  return cliCommand(args, options, "null").spawn();
}

/** `main.ts` with the binary's permission flags, a fresh data dir and no registry; stdout and stderr piped. */
function cliCommand(
  args: string[],
  options: RunCliOptions,
  stdin: "inherit" | "null",
): Deno.Command {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", ...DENO_RUN_FLAGS, `${ROOT}main.ts`, ...args],
    clearEnv: true,
    env: {
      ...plainEnvironment(),
      NO_COLOR: "1",
      RUNNER_DATA_DIR: tempDir(),
      RUNNER_REGISTRY_URL: emptyRegistryUrl(),
      ...options.env,
    },
    stdin,
    stdout: "piped",
    stderr: "piped",
  });
}

/** Whether a process is alive (not a zombie). */
export function isAlive(pid: number): boolean {
  try {
    const stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/** The fixture's `--pid-file` (written with `--grandchild`): agent, grandchild and that one's child. */
export function agentPids(pidFile: string): number[] {
  const pids = JSON.parse(Deno.readTextFileSync(pidFile));
  const names = ["agent_pid", "grandchild_pid", "grandchild_child_pid"];
  return names.map((name) => {
    const pid = pids[name];
    if (!Number.isInteger(pid) || pid <= 0) {
      throw new Error(
        `${pidFile} has no ${name} (run the fixture with --grandchild)`,
      );
    }
    return pid;
  });
}

/** Fails unless the fixture's agent, its grandchild and that one's child (from `--pid-file`) are all gone. */
export function assertAgentGone(pidFile: string): void {
  for (const pid of agentPids(pidFile)) {
    if (isAlive(pid)) throw new Error(`agent process ${pid} outlived its run`);
  }
}

/**
 * A free port on 127.0.0.1 for a server a test starts with a fixed port,
 * below the kernel's range for ephemeral ports: a port-0 listener or an
 * outgoing connection of a test running beside it cannot take it before the
 * server listens (as one taken from that range could).
 */
export function freePort(): number {
  const [ephemeralLow] = ephemeralPortRange();
  const low = Math.max(10_000, ephemeralLow - 12_000);
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = low + Math.floor(Math.random() * (ephemeralLow - low));
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch (error) {
      if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    }
  }
  throw new Error("no free port below the ephemeral range");
}

function ephemeralPortRange(): [number, number] {
  try {
    const text = Deno.readTextFileSync(
      "/proc/sys/net/ipv4/ip_local_port_range",
    );
    const [low, high] = text.trim().split(/\s+/).map(Number);
    if (low > 11_000 && high >= low) return [low, high];
  } catch {
    // Not Linux: the IANA range.
  }
  return [49_152, 65_535];
}

/** Directories made by {@linkcode tempDir} in this test module. */
const madeDirs: string[] = [];

function removeMadeDirs(): void {
  for (const dir of madeDirs.splice(0)) {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }
}

/**
 * A fresh temporary directory, removed with everything in it when the test
 * module unloads (after its last test). Tests use this, never
 * `Deno.makeTempDir` directly, so a run of the suite leaves nothing behind.
 */
export function tempDir(prefix = "runner-test-"): string {
  if (!madeDirs.length) {
    globalThis.removeEventListener("unload", removeMadeDirs);
    globalThis.addEventListener("unload", removeMadeDirs);
  }
  const dir = Deno.makeTempDirSync({ prefix });
  madeDirs.push(dir);
  return dir;
}

/** Parses NDJSON output into objects. */
export function parseJsonLines(text: string): Record<string, unknown>[] {
  return text.split("\n").filter((line) => line.trim()).map((line) =>
    JSON.parse(line)
  );
}

/** Reads the fixture's `--record` file. */
export function readRecord(path: string): Record<string, unknown>[] {
  try {
    return parseJsonLines(Deno.readTextFileSync(path));
  } catch {
    return [];
  }
}

/**
 * The ACP calls (entries with a `method`) of the last agent process in the
 * fixture's `--record` file: a shared record holds earlier processes too.
 */
export function recordedCalls(path: string): Record<string, unknown>[] {
  const all = readRecord(path);
  const start = all.findLastIndex((entry) => entry.event === "start");
  return all.slice(start + 1).filter((entry) =>
    typeof entry.method === "string"
  );
}

/** Opens the embedded SQLite store in `dataDir` at once (for synchronous test harnesses). */
export function openStoreNow(dataDir: string): RunStore {
  return asyncRunStore(
    openSqliteStore({ path: join(dataDir, STORE_FILE_NAME) }),
  );
}

/**
 * `runner run custom` arguments for the fixture agent with `fixtureFlags`, in
 * a fresh workspace and the data directory `dataDir`, then `extra`.
 */
export function fixtureRunArgsIn(
  dataDir: string,
  fixtureFlags: string[],
  ...extra: string[]
): string[] {
  return customRunArgs(
    fixtureCommand(...fixtureFlags),
    join(tempDir(), "ws"),
    ["--data-dir", dataDir, ...extra],
  );
}

/** `runner run custom --acp-command <acpCommand> --workspace <workspace>`, then `extra`. */
export function customRunArgs(
  acpCommand: string,
  workspace: string,
  extra: string[],
): string[] {
  return [
    "run",
    "custom",
    "--acp-command",
    acpCommand,
    "--workspace",
    workspace,
    ...extra,
  ];
}

/** `runner daemon` arguments dialling the hub at `url` as `daemonId`, then `extra`. */
export function daemonCliArgs(
  url: string,
  daemonId: string,
  ...extra: string[]
): string[] {
  return ["daemon", "--url", url, "--daemon-id", daemonId, ...extra];
}

/** {@linkcode fixtureRunArgsIn} with a fresh data directory. */
export function fixtureRunArgs(
  fixtureFlags: string[],
  ...extra: string[]
): string[] {
  return fixtureRunArgsIn(tempDir(), fixtureFlags, ...extra);
}

/**
 * `runner run custom --json` arguments that run `acpCommand` in `workspace`
 * with client terminals on and no LangBot assets, then `extra`, prompting "go".
 */
export function clientTerminalRunArgs(
  acpCommand: string,
  workspace: string,
  extra: string[] = [],
): string[] {
  return customRunArgs(acpCommand, workspace, [
    ...["--client-terminals", "true", "--langbot-assets-enabled", "false"],
    ...extra,
    "--json",
    "go",
  ]);
}

/**
 * A long `sleep` child (`kill` it when done); with `ownGroup` it leads a
 * process group of its own, like an agent.
 */
export function spawnSleeper(
  options: { ownGroup?: boolean } = {},
): Deno.ChildProcess {
  return new Deno.Command("sleep", {
    args: ["1000"],
    stdin: "null",
    stdout: "null",
    stderr: "null",
    detached: options.ownGroup ?? false,
  }).spawn();
}

/** Where {@linkcode conversationRunArgs} runs: one conversation's dirs. */
export interface ConversationRun {
  /** The fixture agent's flags. */
  fixtureFlags: string[];
  /** The runner's data directory, which keeps the conversation. */
  dataDir: string;
  /** The agent's workspace. */
  workspace: string;
  /** Print the answer as text, the way a person reads it (no `--json`). */
  plainText?: boolean;
}

/**
 * `runner run custom --json` arguments of a turn of the conversation `c1`
 * with the fixture agent: `extra`, then the prompt `text`.
 */
export function conversationRunArgs(
  where: ConversationRun,
  text: string,
  extra: string[] = [],
): string[] {
  return customRunArgs(fixtureCommand(...where.fixtureFlags), where.workspace, [
    ...["--data-dir", where.dataDir, "--conversation", "c1"],
    ...where.plainText ? [] : ["--json"],
    ...extra,
    text,
  ]);
}

/** Whether anything exists at `path` (a link counts as its target). */
export function pathExists(path: string): boolean {
  return found(Deno.statSync, path);
}

/** Whether anything is at `path`, a link to nowhere included. */
export function entryExists(path: string): boolean {
  return found(Deno.lstatSync, path);
}

function found(look: (path: string) => unknown, path: string): boolean {
  try {
    look(path);
    return true;
  } catch {
    return false;
  }
}
