/**
 * The run's client terminals (`client-terminals`, `docs/permissions.md`,
 * "Client terminals"): each `terminal/create` is confined to the workspace
 * by real path, decided by the permission policy before anything runs, and
 * started in a process group of its own (registered with the reaper, under
 * the agent's sandbox, with the agent's environment), with stdin closed and
 * stdout and stderr read into one output in arrival order. Every terminal of
 * the run is killed when the run ends or its agent is kept warm.
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
import { TerminalOutput } from "../acp/terminal_output.ts";
import { unknownTerminal } from "../acp/terminals.ts";
import { type AgentProcess, spawnAgent } from "../agent/process.ts";
import { requireSandbox, sandboxArgv } from "../agent/sandbox.ts";
import { createStreamRedactor } from "../secrets.ts";
import { settleWithin } from "../timing.ts";
import type { RunContext, RunTerminals } from "./context.ts";
import { mayRunCommand } from "./permission_policy.ts";
import type { TerminalLaunch } from "./types.ts";

/** How long an exited command's pipes may stay open (held by a background child) before its exit is reported. */
const DRAIN_AFTER_EXIT_MS = 1000;

/** One started command. */
interface Terminal {
  process: AgentProcess;
  output: TerminalOutput;
  /** Resolves once the command exited and its output is in. */
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
  const all: Terminal[] = [];
  let closed = false;
  let next = 0;
  const find = (terminalId: string) => {
    const terminal = terminals.get(terminalId);
    if (!terminal) throw unknownTerminal(terminalId);
    return terminal;
  };
  return {
    async create(params) {
      if (closed) throw ending();
      const terminalId = `term-${++next}`;
      await startTerminal(run, {
        launch,
        params,
        terminalId,
        closed: () => closed,
        adopt(terminal) {
          terminals.set(terminalId, terminal);
          all.push(terminal);
        },
      });
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
    async kill(terminalId) {
      const terminal = find(terminalId);
      await terminal.process.terminate();
      await terminal.exited;
    },
    async release(terminalId) {
      const terminal = find(terminalId);
      terminals.delete(terminalId);
      await terminal.process.terminate();
      await terminal.exited;
    },
    async closeAll() {
      closed = true;
      terminals.clear();
      await Promise.all(all.map(async (terminal) => {
        await terminal.process.terminate();
        await terminal.exited;
      }));
    },
  };
}

function ending(): acp.RequestError {
  return acp.RequestError.invalidRequest(
    {},
    "the run is ending; no more terminals start",
  );
}

interface StartOptions {
  launch: TerminalLaunch;
  params: CreateTerminalRequest;
  terminalId: string;
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
  const root = run.options.sessionCwd;
  const cwd = await confineDirectory(root, params.cwd ?? root);
  const shown = relative(await Deno.realPath(root), cwd).split(sep).join("/") ||
    ".";
  const args = params.args ?? [];
  const command = { terminalId, command: params.command, args, cwd: shown };
  if (!await mayRunCommand(run, command)) {
    throw acp.RequestError.invalidParams(
      { command: params.command },
      "the run's permission policy rejected this command",
    );
  }
  // From here to `adopt` nothing waits: the set cannot close in between.
  if (options.closed()) throw ending();
  const limit = Math.min(
    run.config.terminalOutputBytes,
    params.outputByteLimit ?? Infinity,
  );
  const output = new TerminalOutput(Math.max(1, Math.floor(limit)));
  const redactor = createStreamRedactor(run.secrets);
  const take = (text: string) => {
    const kept = output.push(text);
    const shownText = kept ? redactor.push(kept) : "";
    if (run.config.streaming && shownText) {
      run.emitter.emit("terminal.output", {
        terminal_id: terminalId,
        output: shownText,
        truncated: output.truncated,
      });
    }
  };
  const process = spawnCommand(run, { ...options, cwd, onStderr: take });
  run.emitter.emit("terminal.started", {
    terminal_id: terminalId,
    command: params.command,
    args,
    cwd: shown,
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
    flush: () => redactor.end(),
  });
  options.adopt(terminal);
}

/** Starts the command in a process group of its own, under the agent's sandbox. */
function spawnCommand(
  run: RunContext,
  options: StartOptions & { cwd: string; onStderr: (text: string) => void },
): AgentProcess {
  const { launch, params, cwd } = options;
  const commandArgv = [params.command, ...(params.args ?? [])];
  const env = { ...launch.env };
  for (const entry of params.env ?? []) env[entry.name] = entry.value;
  try {
    const argv = launch.sandbox
      ? sandboxArgv(requireSandbox(), launch.sandbox, commandArgv, cwd)
      : commandArgv;
    return spawnAgent({
      argv,
      cwd,
      env,
      secrets: [...run.secrets],
      stderrTailBytes: 1,
      registry: launch.registry,
      onStderr: options.onStderr,
      sandbox: launch.sandbox,
    });
  } catch (error) {
    const cause = error instanceof Error ? error.cause ?? error : error;
    throw acp.RequestError.invalidParams(
      { command: params.command },
      cause instanceof Deno.errors.NotFound
        ? "command not found"
        : `the command could not be started (${
          cause instanceof Error ? cause.message : String(cause)
        })`,
    );
  }
}

/**
 * Reads stdout, closes stdin, kills the group at `terminal-timeout`, and
 * reports the exit once the command exited and its output is in.
 */
async function watchTerminal(
  run: RunContext,
  watch: {
    terminal: Terminal;
    terminalId: string;
    take: (text: string) => void;
    flush: () => string;
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
  clearTimeout(timer);
  await settleWithin(
    Promise.all([reading, process.stderrEnded]),
    DRAIN_AFTER_EXIT_MS,
  );
  const rest = watch.flush();
  if (rest && run.config.streaming) {
    run.emitter.emit("terminal.output", {
      terminal_id: terminalId,
      output: rest,
      truncated: terminal.output.truncated,
    });
  }
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
