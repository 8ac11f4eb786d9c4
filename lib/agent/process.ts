/**
 * Agent processes: spawning in a process group of their own, the stderr tail,
 * and teardown of the whole group. See `docs/teardown.md`.
 *
 * @module
 */

import { resolve } from "node:path";
import { RunnerError } from "../errors.ts";
import { killGroup, signalGroup } from "./process_group.ts";
import { processGroupMembers } from "./process_table.ts";
import { findOnPath } from "./find_executable.ts";
import { inPidNamespace } from "./pid_namespace.ts";
import { requireSandbox, type SandboxPlan } from "./sandbox.ts";
import {
  type PendingNetwork,
  prepareSandboxNetwork,
} from "./sandbox_network.ts";
import { withSeccomp } from "./seccomp_launch.ts";
import type { ReaperRegistry } from "./reaper.ts";
import { redactSecrets, redactTail } from "../secrets.ts";
import { settleWithin } from "../timing.ts";

/** How an agent process is started. */
export interface SpawnAgentOptions {
  /** Program and arguments; no shell is involved. */
  argv: string[];
  /** Working directory of the agent process. */
  cwd: string;
  /** The agent's whole environment (nothing else is inherited). */
  env: Record<string, string>;
  /** Values to redact from the stderr tail. */
  secrets?: string[];
  /** Bytes of stderr kept for diagnostics (default 64 KiB). */
  stderrTailBytes?: number;
  /** Records the process group so a later start can reap it after a crash. */
  registry?: ReaperRegistry;
  /** Sees each stderr chunk as text (unredacted; for in-band markers). */
  onStderr?: (text: string) => void;
  /** The agent is confined (`argv` starts bwrap): refused with `sandbox.unavailable` when this machine cannot; started with the seccomp filter. */
  sandbox?: SandboxPlan;
  /**
   * An unconfined command of a run (a local agent, a client terminal): run
   * in a PID namespace of its own where bubblewrap can make one, so nothing
   * it starts outlives it (`docs/teardown.md`).
   */
  ownPidNamespace?: boolean;
  /**
   * With a confined `full` network: the agent waits for
   * {@linkcode AgentProcess.openNetwork} (with the ports of its assets
   * endpoint) instead of getting a network without forwarded ports at once.
   */
  deferNetwork?: boolean;
}

/** Options for {@linkcode AgentProcess.terminate}. */
export interface TerminateOptions {
  /** Time between SIGTERM and SIGKILL (default 2000 ms). */
  graceMs?: number;
}

/** A running agent process and its process group. */
export interface AgentProcess {
  /** The process id, which is also the process group id. */
  readonly pid: number;
  /** The agent's stdin. */
  readonly stdin: WritableStream<Uint8Array>;
  /** The agent's stdout. */
  readonly stdout: ReadableStream<Uint8Array>;
  /** Resolves when the agent process itself exits. */
  readonly exited: Promise<Deno.CommandStatus>;
  /** The last bytes of stderr, decoded, without ANSI escapes, secrets redacted. */
  stderrTail(): string;
  /** Resolves once stderr has been read to its end (every writer closed it). */
  readonly stderrEnded: Promise<void>;
  /** Closes stdin, SIGTERMs the group, SIGKILLs it after the grace period, and waits until no member is left. */
  terminate(options?: TerminateOptions): Promise<void>;
  /**
   * A confined agent with a `full` network: gives it its network, forwarding
   * the host's loopback `ports` only (once; later calls return the first),
   * and lets it start. Rejects with `sandbox.unavailable`; the agent then
   * never starts.
   */
  openNetwork?(ports: readonly number[]): Promise<void>;
}

const DEFAULT_STDERR_TAIL = 64 * 1024;

/** How long stderr may stay open once the group is gone (held by a process outside it). */
const STDERR_DRAIN_MS = 2000;

/** Starts an agent in a new process group with piped stdio; stderr is always drained. */
export function spawnAgent(options: SpawnAgentOptions): AgentProcess {
  if (!options.argv[0]) {
    throw new RunnerError("config.invalid", "The agent command is empty.");
  }
  // Never unconfined: without a working bubblewrap the agent does not start.
  if (options.sandbox) requireSandbox();
  const { child, network } = startLaunch(options);
  const pid = child.pid;
  network?.attach(pid, child.status);
  let registration: ReturnType<ReaperRegistry["register"]> | undefined;
  try {
    registration = options.registry?.register(pid);
  } catch (error) {
    // Without a record the reaper could never find this group: do not keep it.
    signalGroup(pid, "SIGKILL");
    void network?.close();
    throw new RunnerError(
      "runner.internal",
      `Could not record the agent's process group in the data directory (${
        error instanceof Error ? error.message : error
      }). Check that the data directory is writable.`,
      { cause: error },
    );
  }
  const tail = new TailBuffer(options.stderrTailBytes ?? DEFAULT_STDERR_TAIL);
  const stderrDrained = drainInto(child.stderr, tail, options.onStderr);
  const exited = child.status;
  let leaderGone = false;
  exited.then(() => leaderGone = true, () => leaderGone = true);
  const networkClosed = network &&
    startNetwork(network, { exited, deferred: options.deferNetwork });
  let terminating: Promise<void> | undefined;
  const secrets = options.secrets ?? [];

  async function terminate(terminateOptions: TerminateOptions = {}) {
    terminating ??= (async () => {
      // A stdin write the agent never reads would hold close() forever.
      await settleWithin(child.stdin.close(), 500);
      // A group that is already empty is never signalled: its id may name
      // another process group by now.
      if (!leaderGone || (await processGroupMembers(pid)).length) {
        await killGroup(pid, exited, terminateOptions.graceMs ?? 2000);
      }
      await child.stdout.cancel().catch(() => {});
      // A process that left the group (setsid) may hold stderr open for good.
      await settleWithin(stderrDrained, STDERR_DRAIN_MS);
      await networkClosed;
      registration?.release();
    })();
    return await terminating;
  }

  return {
    pid,
    stdin: child.stdin,
    stdout: child.stdout,
    exited,
    stderrTail: () =>
      (tail.cut ? redactTail : redactSecrets)(stripAnsi(tail.text()), secrets),
    stderrEnded: stderrDrained,
    terminate,
    openNetwork: network && ((ports) => network.open(ports)),
  };
}

/** A prepared network still to be attached to its started process. */
type AttachableNetwork = ReturnType<typeof prepareSandboxNetwork>;

/**
 * Spawns what `options` describes: the hardened launch, wrapped in its
 * private network when it has one (pasta joins that namespace before the
 * trampoline and bwrap start).
 */
function startLaunch(
  options: SpawnAgentOptions,
): { child: Deno.ChildProcess; network?: AttachableNetwork } {
  const launch = launchOf(options);
  let network: AttachableNetwork | undefined;
  try {
    network = options.sandbox?.network === "full"
      ? prepareSandboxNetwork({ argv: launch.argv, registry: options.registry })
      : undefined;
  } catch (error) {
    // No network (no pasta, no FIFOs): the filter file is not left behind.
    launch.release();
    throw error;
  }
  let child: Deno.ChildProcess;
  try {
    child = spawnDetached(network?.argv ?? launch.argv, {
      cwd: options.cwd,
      env: launch.env,
    });
  } catch (error) {
    launch.release();
    void network?.close();
    throw spawnFailure(options.argv[0], error);
  }
  // The trampoline deletes the filter file at once; this is for a shell
  // that never got that far.
  child.status.finally(launch.release).catch(() => {});
  return { child, network };
}

/** What is started for `options`: its argv and environment, and what to clean up after. */
function launchOf(
  options: SpawnAgentOptions,
): { argv: string[]; env: Record<string, string>; release: () => void } {
  if (options.sandbox) {
    const confined = withSeccomp(options.argv, options.env);
    return {
      argv: confined.argv,
      env: confined.env,
      release: () => {
        if (confined.filterFile) removeQuietly(confined.filterFile);
      },
    };
  }
  const [program] = options.argv;
  // A program that is not there is left to fail as before (`acp.missing_binary`).
  const found = options.ownPidNamespace &&
    findOnPath(
      program.includes("/") ? resolve(options.cwd, program) : program,
      options.env.PATH,
    );
  return {
    argv: found ? inPidNamespace(options.argv, options.cwd) : options.argv,
    env: options.env,
    release: () => {},
  };
}

function removeQuietly(path: string): void {
  try {
    Deno.removeSync(path);
  } catch { /* the trampoline removed it */ }
}

/** Starts `argv` in a session and process group of its own, with piped stdio. */
function spawnDetached(
  argv: string[],
  options: Pick<SpawnAgentOptions, "cwd" | "env">,
): Deno.ChildProcess {
  const [program, ...args] = argv;
  return new Deno.Command(program, {
    args,
    cwd: options.cwd,
    env: options.env,
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
    detached: true,
  }).spawn();
}

/** Opens the network now unless deferred; stops pasta once the agent is gone. */
function startNetwork(
  network: PendingNetwork,
  options: { exited: Promise<unknown>; deferred?: boolean },
): Promise<void> {
  if (!options.deferred) network.open([]).catch(() => {});
  // pasta outlives the namespace it serves unless stopped.
  return options.exited.then(() => network.close(), () => network.close());
}

/**
 * CSI sequences (colours, cursor moves), OSC strings, two-byte escapes, and
 * the control characters but tab and newline.
 */
const ANSI_ESCAPE =
  // deno-lint-ignore no-control-regex -- matching ESC is the point
  /\x1b\[[0-?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|\x9b[0-?]*[ -\/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;

/**
 * Removes terminal escape sequences (agents colour their stderr) and control
 * characters: what a reader does not see, so the redaction that follows sees
 * the text as the reader does.
 */
export function stripAnsi(text: string): string {
  return text.replace(ANSI_ESCAPE, "");
}

function spawnFailure(program: string, error: unknown): RunnerError {
  if (error instanceof Deno.errors.NotFound) {
    return new RunnerError(
      "acp.missing_binary",
      `The agent command "${program}" was not found. Install the agent, put it on PATH (or pass PATH through env-json), or set acp-command to its absolute path.`,
      { cause: error },
    );
  }
  const reason = error instanceof Error ? error.message : String(error);
  return new RunnerError(
    "acp.spawn_error",
    `The agent command "${program}" could not be started (${reason}). Check that it is executable and that the workspace exists.`,
    { cause: error },
  );
}

async function drainInto(
  stream: ReadableStream<Uint8Array>,
  tail: TailBuffer,
  onText?: (text: string) => void,
): Promise<void> {
  const decoder = new TextDecoder();
  try {
    for await (const chunk of stream) {
      tail.push(chunk);
      onText?.(decoder.decode(chunk, { stream: true }));
    }
  } catch {
    // The pipe closed under us: nothing more to keep.
  }
  // An incomplete character at the very end still shows (as U+FFFD).
  const rest = decoder.decode();
  if (rest) onText?.(rest);
}

/** Keeps the last `limit` bytes pushed into it. */
class TailBuffer {
  #chunks: Uint8Array[] = [];
  #size = 0;
  #dropped = false;
  constructor(private readonly limit: number) {}

  push(chunk: Uint8Array) {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    while (this.#size - this.#chunks[0].length >= this.limit) {
      this.#size -= this.#chunks.shift()!.length;
      this.#dropped = true;
    }
  }

  /** Whether the text lost its beginning (more than `limit` bytes came). */
  get cut(): boolean {
    return this.#dropped || this.#size > this.limit;
  }

  text(): string {
    const all = new Uint8Array(this.#size);
    let offset = 0;
    for (const chunk of this.#chunks) {
      all.set(chunk, offset);
      offset += chunk.length;
    }
    const start = Math.max(0, all.length - this.limit);
    return new TextDecoder().decode(all.subarray(start));
  }
}
