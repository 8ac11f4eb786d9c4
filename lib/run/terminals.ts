/**
 * The run's client terminals (`client-terminals`, `docs/permissions.md`,
 * "Client terminals"): each `terminal/create` is confined to the workspace
 * by real path, decided by the permission policy before anything runs, and
 * started in a process group of its own (registered with the reaper, under
 * the agent's sandbox, with the agent's environment), with stdin closed and
 * stdout and stderr read into one output in arrival order. When a command
 * exits, whatever it left running in its group is killed; at most
 * {@linkcode MAX_TERMINALS} are held at once, and at most
 * `terminal-output-bytes` of each, {@linkcode RUN_OUTPUT_FACTOR} times that
 * of all together, go out as events. Every terminal of the run is killed
 * when the run ends or its agent is kept warm. Unconfined, each command runs
 * in a PID namespace of its own where bubblewrap can make one, so nothing it
 * starts outlives it.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import type {
  CreateTerminalRequest,
  TerminalExitStatus,
} from "@agentclientprotocol/sdk";
import { relative, sep } from "node:path";
import { confineDirectory } from "../acp/fs.ts";
import { TerminalOutput, utf8Bytes, utf8Head } from "../acp/terminal_output.ts";
import { unknownTerminal } from "../acp/terminals.ts";
import { type AgentProcess, spawnAgent } from "../agent/process.ts";
import {
  requireSandbox,
  sandboxArgv,
  withSandboxEnv,
} from "../agent/sandbox.ts";
import { createStreamRedactor, redactSecrets } from "../secrets.ts";
import { createControlStripper } from "./terminal_controls.ts";
import { settleWithin } from "../timing.ts";
import type { RunContext, RunTerminals } from "./context.ts";
import { mayRunCommand } from "./permission_policy.ts";
import { checkCommand, type CheckedCommand } from "./terminal_command.ts";
import { inDecidedCwd } from "./terminal_cwd.ts";
import type { TerminalLaunch } from "./types.ts";

/** How long an exited command's pipes may stay open (held by a process that left its group) before its exit is reported. */
const DRAIN_AFTER_EXIT_MS = 1000;

/** The most terminals a run holds at once (created and not yet released). */
export const MAX_TERMINALS = 64;

/**
 * How many times `terminal-output-bytes` all of a run's terminals together
 * may send as `terminal.output` events.
 */
export const RUN_OUTPUT_FACTOR = 4;

/** The `terminal.output` bytes a run may still send, shared by its terminals. */
interface RunOutputBudget {
  /** The run's limit in bytes. */
  readonly cap: number;
  /** Bytes sent so far. */
  sent: number;
}

/** One started command. */
interface Terminal {
  process: AgentProcess;
  output: TerminalOutput;
  /** Resolves once the command exited, its group is gone and its output is in. */
  exited: Promise<TerminalExitStatus>;
  exit?: TerminalExitStatus;
  timedOut: boolean;
}

/** Makes the run's terminal set; commands start with what `launch` holds. */
export function createRunTerminals(
  run: RunContext,
  launch: TerminalLaunch,
): RunTerminals {
  const terminals = new Map<string, Terminal>();
  const live = new Set<Terminal>();
  const budget: RunOutputBudget = {
    cap: run.config.terminalOutputBytes * RUN_OUTPUT_FACTOR,
    sent: 0,
  };
  let closed = false;
  let starting = 0;
  const find = (terminalId: string) => {
    const terminal = terminals.get(terminalId);
    if (!terminal) throw unknownTerminal(terminalId);
    return terminal;
  };
  const end = async (terminal: Terminal) => {
    await terminal.process.terminate();
    await terminal.exited;
  };
  return {
    async create(params) {
      if (closed) throw ending();
      if (terminals.size + starting >= MAX_TERMINALS) throw tooMany();
      // Unguessable: a warm agent's stale id never names a later run's terminal.
      const terminalId = `term-${crypto.randomUUID()}`;
      starting++;
      try {
        await startTerminal(run, {
          launch,
          params,
          terminalId,
          budget,
          closed: () => closed,
          adopt(terminal) {
            terminals.set(terminalId, terminal);
            live.add(terminal);
          },
        });
      } finally {
        starting--;
      }
      return terminalId;
    },
    output(terminalId) {
      const terminal = find(terminalId);
      return {
        output: terminal.output.text(),
        truncated: terminal.output.truncated,
        ...(terminal.exit ? { exitStatus: terminal.exit } : {}),
      };
    },
    waitForExit: (terminalId) => find(terminalId).exited,
    kill: (terminalId) => end(find(terminalId)),
    async release(terminalId) {
      const terminal = find(terminalId);
      terminals.delete(terminalId);
      await end(terminal);
      // Forgotten for good: its output is no longer held.
      live.delete(terminal);
    },
    async closeAll() {
      closed = true;
      terminals.clear();
      await Promise.all([...live].map(end));
      live.clear();
    },
  };
}

function ending(): acp.RequestError {
  return acp.RequestError.invalidRequest(
    {},
    "the run is ending; no more terminals start",
  );
}

function tooMany(): acp.RequestError {
  return acp.RequestError.invalidRequest(
    { limit: MAX_TERMINALS },
    `the run already holds ${MAX_TERMINALS} terminals; release some (terminal/release) before creating more`,
  );
}

interface StartOptions {
  launch: TerminalLaunch;
  params: CreateTerminalRequest;
  terminalId: string;
  /** The run's `terminal.output` budget. */
  budget: RunOutputBudget;
  /** Whether the set is closed (the run is ending). */
  closed: () => boolean;
  /** Takes the started terminal into the set, before anything else can run. */
  adopt: (terminal: Terminal) => void;
}

/** Confines, decides, spawns and watches one command. */
async function startTerminal(
  run: RunContext,
  options: StartOptions,
): Promise<void> {
  const { params, terminalId } = options;
  const root = run.realRoot ?? await Deno.realPath(run.options.sessionCwd);
  const cwd = await confineDirectory(root, params.cwd ?? root);
  const shown = relative(root, cwd).split(sep).join("/") || ".";
  const checked = checkCommand(params, options.launch.env.PATH, cwd);
  const command = { terminalId, ...checked, cwd: shown };
  if (!await mayRunCommand(run, command)) {
    throw acp.RequestError.invalidParams(
      { command: params.command },
      "the run's permission policy rejected this command",
    );
  }
  // The decision can wait for a person: the directory may have been swapped
  // (for a link out) meanwhile; it must still be the one decided on. (Said
  // early; the command itself checks again where it lands, `inDecidedCwd`.)
  if (await confineDirectory(root, cwd) !== cwd) {
    throw acp.RequestError.invalidParams(
      { cwd: params.cwd },
      "the cwd changed while the command was being decided",
    );
  }
  // From here to `adopt` nothing waits: the set cannot close in between.
  if (options.closed()) throw ending();
  const limit = Math.min(
    run.config.terminalOutputBytes,
    params.outputByteLimit ?? Infinity,
  );
  const output = new TerminalOutput(Math.max(1, Math.floor(limit)));
  const show = outputEvents(
    run,
    { terminalId, budget: options.budget },
    output,
  );
  // The events get the whole chunk: a chunk cut to the kept limit could
  // begin inside a secret, past what the redactor can recognise.
  const take = (text: string) => {
    output.push(text);
    show.push(text);
  };
  const process = spawnCommand(run, {
    ...options,
    checked,
    cwd,
    root,
    onStderr: take,
  });
  const hide = (text: string) => redactSecrets(text, run.secrets);
  run.emitter.emit("terminal.started", {
    terminal_id: terminalId,
    command: hide(checked.command),
    args: checked.args.map(hide),
    cwd: hide(shown),
  });
  const terminal: Terminal = {
    process,
    output,
    timedOut: false,
    exited: Promise.resolve({}),
  };
  terminal.exited = watchTerminal(run, {
    terminal,
    terminalId,
    take,
    flush: () => show.end(),
  });
  options.adopt(terminal);
}

/**
 * A terminal's `terminal.output` events: without escapes and control
 * characters, redacted, at most
 * `terminal-output-bytes` of them for the terminal and at most
 * {@linkcode RUN_OUTPUT_FACTOR} times that for all the run's terminals
 * together (`budget`); the event that reaches either limit says `truncated`
 * and `stopped` (and `run_limit` when it was the run's), and none follows
 * for that terminal (the agent still reads the kept output).
 */
function outputEvents(
  run: RunContext,
  ids: { terminalId: string; budget: RunOutputBudget },
  output: TerminalOutput,
): { push: (text: string) => void; end: () => void } {
  const { terminalId, budget } = ids;
  const stripper = createControlStripper();
  const redactor = createStreamRedactor(run.secrets);
  const cap = run.config.terminalOutputBytes;
  let sent = 0;
  let stopped = !run.config.streaming;
  const emit = (text: string) => {
    if (stopped || !text) return;
    const bytes = utf8Bytes(text);
    const runRoom = budget.cap - budget.sent;
    const room = Math.min(cap - sent, runRoom);
    if (bytes <= room) {
      sent += bytes;
      budget.sent += bytes;
      run.emitter.emit("terminal.output", {
        terminal_id: terminalId,
        output: text,
        truncated: output.truncated,
      });
      return;
    }
    stopped = true;
    const head = utf8Head(text, room);
    budget.sent += utf8Bytes(head);
    run.emitter.emit("terminal.output", {
      terminal_id: terminalId,
      output: head,
      truncated: true,
      stopped: true,
      ...(runRoom < cap - sent ? { run_limit: true } : {}),
    });
  };
  return {
    push: (text) => {
      if (!stopped) emit(redactor.push(stripper.push(text)));
    },
    end: () => emit(redactor.end()),
  };
}

/**
 * Starts the command in a process group of its own, under the agent's
 * sandbox, in `cwd` only if that is where the kernel puts it
 * (`inDecidedCwd`; the process itself starts in `root`).
 */
function spawnCommand(
  run: RunContext,
  options: StartOptions & {
    checked: CheckedCommand;
    cwd: string;
    root: string;
    onStderr: (text: string) => void;
  },
): AgentProcess {
  const { launch, checked, cwd, root } = options;
  const commandArgv = [checked.program, ...checked.args];
  try {
    const entered = inDecidedCwd(cwd, commandArgv);
    const argv = launch.sandbox
      ? withSandboxEnv(
        sandboxArgv(requireSandbox(), launch.sandbox, entered, root),
        checked.env,
      )
      : entered;
    // Confined, bwrap (on the host) gets the agent's environment only; the
    // request's variables are set inside the sandbox (`--setenv`).
    const env = { ...launch.env };
    if (!launch.sandbox) {
      for (const entry of checked.env) env[entry.name] = entry.value;
    }
    return spawnAgent({
      argv,
      cwd: root,
      env,
      secrets: [...run.secrets],
      stderrTailBytes: 1,
      registry: launch.registry,
      onStderr: options.onStderr,
      sandbox: launch.sandbox,
      ownPidNamespace: !launch.sandbox,
    });
  } catch (error) {
    const cause = error instanceof Error ? error.cause ?? error : error;
    throw acp.RequestError.invalidParams(
      { command: checked.command },
      cause instanceof Deno.errors.NotFound
        ? "command not found"
        : `the command could not be started (${
          cause instanceof Error ? cause.message : String(cause)
        })`,
    );
  }
}

/**
 * Reads stdout, closes stdin, kills the group at `terminal-timeout`, kills
 * what the command left running in its group once it exited (the command is
 * done; `terminal-timeout` holds for all of it), and reports the exit once
 * the group is gone and the output is in.
 */
async function watchTerminal(
  run: RunContext,
  watch: {
    terminal: Terminal;
    terminalId: string;
    take: (text: string) => void;
    flush: () => void;
  },
): Promise<TerminalExitStatus> {
  const { terminal, terminalId } = watch;
  const { process } = terminal;
  const timer = setTimeout(() => {
    terminal.timedOut = true;
    process.terminate().catch(() => {});
  }, run.config.terminalTimeout * 1000);
  const reading = (async () => {
    try {
      for await (
        const text of process.stdout.pipeThrough(new TextDecoderStream())
      ) watch.take(text);
    } catch { /* the pipe closed under us */ }
  })();
  await settleWithin(process.stdin.close(), 500);
  const status = await process.exited;
  await process.terminate().catch(() => {});
  clearTimeout(timer);
  await settleWithin(
    Promise.all([reading, process.stderrEnded]),
    DRAIN_AFTER_EXIT_MS,
  );
  watch.flush();
  const exit: TerminalExitStatus = {
    exitCode: status.signal ? null : status.code,
    signal: status.signal ?? null,
  };
  terminal.exit = exit;
  run.emitter.emit("terminal.exited", {
    terminal_id: terminalId,
    exit_code: exit.exitCode,
    signal: exit.signal,
    truncated: terminal.output.truncated,
    timed_out: terminal.timedOut,
  });
  return exit;
}
