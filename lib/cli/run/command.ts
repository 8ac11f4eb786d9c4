/**
 * `runner run <provider> "prompt"`: one local run from the command line,
 * agent text streamed to stdout, progress on stderr, or one event per line
 * with `--json`. Exit code: 0 completed, 1 failed, 2 bad input, 3 the agent
 * ended the turn as cancelled itself, 130 cancelled by SIGINT, 143 cancelled
 * by SIGTERM, 129 by SIGHUP.
 *
 * `cli/run/` owns `runner run` as a command: where the prompt and its
 * attachments come from (`prompt_input.ts`), what it prints (`output.ts`,
 * in few writes by `buffered_output.ts`), the progress line
 * (`progress.ts`), the terminal's answers to permission requests (`terminal_approvals.ts`) and
 * the agent's head start (`head_start.ts`: a local run's agent is spawned
 * before the run machinery loads).
 *
 * @module
 */

import { listenForRunSignals, type RunSignals } from "./signals.ts";
import { join } from "node:path";
import {
  configFlagOptions,
  configFromFlags,
  parseFlags,
  registryUrlFromEnv,
  reportFailure,
  reportUsageError,
} from "../args.ts";
import { parseRunConfig } from "../../config.ts";
import { RunnerError } from "../../errors.ts";
import { eventPrinter } from "./output.ts";
import type { Attachment } from "../../run/prompt.ts";
import type { RunRequest } from "../../run/request.ts";
import type { RunResult } from "../../run/types.ts";
import { defaultDataDir } from "../../store/data_dir.ts";
import { installReporting } from "../install_progress.ts";
import { prefetchOwnStartTime } from "../../store/owner_liveness.ts";
import { createProgress } from "./progress.ts";
import { attachmentFrom, readPromptText } from "./prompt_input.ts";
import type { RunStore } from "../../store/types.ts";
import { isTerminalEvent, type RunEvent } from "../../events.ts";
import { usageLine } from "./usage_line.ts";
import type { RunManager } from "../../run/manager.ts";
import { type HeadStart, startAgentAhead } from "./head_start.ts";
import {
  createTerminalApprover,
  terminalPermissionDecision,
} from "./terminal_approvals.ts";

/** Help text of `runner run`. */
export const RUN_HELP = `Usage: runner run <provider> [options] "prompt"
       runner run <provider> [options] -        (the prompt from standard input)
       some-command | runner run <provider> [options]

Runs one prompt with an ACP agent on this machine and streams its answer.
On a terminal a progress line shows while the agent starts.

Options:
  --prompt-file PATH     read the prompt from a file
  --workspace DIR        the agent's working directory (default: the current
                         directory; absolute or ~/…; created if missing)
  --acp-command CMD      the agent command (required for provider=custom)
  --env-json JSON        extra environment for the agent, e.g. '{"API_KEY":"…"}'
  --conversation ID      keep the agent's session across invocations
  --attach PATH|URL      attach a file or URL (repeatable)
  --reuse-session BOOL   reuse the stored session (default true)
  --permission-decision  ask | allow_once | allow_always | reject_once |
                         reject_always (default: ask on a terminal, where you
                         answer [y]es once / [a]lways / [n]o / [N]ever;
                         allow_once otherwise)
  --sandbox confined     run the agent under bubblewrap: it sees its workspace
                         and its own state, not the rest of the machine
                         (docs/sandbox.md)
  --json                 print one run event per line (JSON)
  --data-dir DIR         where the store lives (default: the user data dir)
  --<config-key> VALUE   any run config key, e.g. --timeout 300 (see docs/config.md)

Exit codes: 0 completed, 1 failed, 2 bad input, 3 the agent ended the turn on
its own without answering after a refused permission (run.permission_rejected)
or as cancelled (run.agent_cancelled), 130 cancelled by SIGINT (Ctrl-C), 143
cancelled by SIGTERM, 129 by SIGHUP (the terminal closed).
`;

/** Parses the command line of `runner run`. */
function parseRunFlags(args: string[]) {
  const parsed = parseFlags({
    args,
    allowPositionals: true,
    options: {
      ...configFlagOptions(),
      conversation: { type: "string" },
      attach: { type: "string", multiple: true },
      json: { type: "boolean" },
      "data-dir": { type: "string" },
      "run-id": { type: "string" },
      "prompt-file": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
  });
  return {
    positionals: parsed.positionals,
    values: parsed.values as
      & typeof parsed.values
      & Record<string, string | undefined>,
  };
}

/** What `runner run` was asked to do. */
interface RunInvocation {
  /** The run to start. */
  request: RunRequest;
  /** Print events as JSON lines instead of human output. */
  json: boolean;
  /** `--data-dir`, when given. */
  dataDir?: string;
}

/**
 * Reads the invocation from the command line, reading attached files; returns
 * the exit code instead when there is nothing to run (help, bad input).
 */
async function readRunInvocation(
  args: string[],
): Promise<RunInvocation | number> {
  let parsed;
  try {
    parsed = parseRunFlags(args);
  } catch (error) {
    return reportUsageError(error, "run");
  }
  const { positionals, values } = parsed;
  if (values.help) {
    console.log(RUN_HELP);
    return 0;
  }
  const [provider, ...words] = positionals;
  if (!provider && !values.provider) {
    return reportUsageError(
      new RunnerError(
        "config.invalid",
        'Give a provider: runner run <provider> "prompt" (runner providers lists them).',
      ),
      "run",
    );
  }
  let config, text;
  const attachments: Attachment[] = [];
  try {
    config = parseRunConfig({
      ...configFromFlags(values),
      "permission-decision": terminalPermissionDecision({
        flag: values["permission-decision"],
        fallback: values["permission-fallback"],
        json: Boolean(values.json),
        interactive: Deno.stdin.isTerminal() && Deno.stderr.isTerminal(),
      }),
      provider: provider ?? values.provider,
      workspace: values.workspace ?? Deno.cwd(),
      "registry-url": values["registry-url"] ?? registryUrlFromEnv(),
    });
    for (const spec of values.attach ?? []) {
      attachments.push(await attachmentFrom(spec));
    }
    text = await readPromptText({
      words,
      promptFile: values["prompt-file"],
      hasAttachments: attachments.length > 0,
    });
    if (!text && !attachments.length) {
      throw new RunnerError(
        "config.invalid",
        'Give a prompt: runner run <provider> "prompt", - for standard input, or --prompt-file.',
      );
    }
  } catch (error) {
    return reportFailure(error);
  }
  return {
    request: {
      runId: values["run-id"],
      conversationId: values.conversation,
      input: { text, attachments },
      config,
    },
    json: Boolean(values.json),
    dataDir: values["data-dir"],
  };
}

/** The run machinery (store, assets, engine, locations), loaded only once there is a run. */
async function loadRunMachinery() {
  const [
    reaper,
    { openStore },
    { createAssetsHook },
    { createRunManager },
    { runnerLocations },
    { createLocalLocation },
  ] = await Promise.all([
    import("../../agent/reaper.ts"),
    import("../../store/open.ts"),
    import("../../assets/wiring.ts"),
    import("../../run/manager.ts"),
    import("../../locations/runner_locations.ts"),
    import("../../locations/local.ts"),
  ]);
  return {
    reaper,
    openStore,
    createAssetsHook,
    createRunManager,
    runnerLocations,
    createLocalLocation,
  };
}

/** Runs `runner run`; returns the exit code. */
export async function runCommand(args: string[]): Promise<number> {
  const invocation = await readRunInvocation(args);
  if (typeof invocation === "number") return invocation;
  const dataDir = invocation.dataDir ?? defaultDataDir();
  prefetchOwnStartTime(); // the store needs it; read it while the rest loads
  const { request } = invocation;
  // From here on the agent may be starting: a signal must not leave it behind.
  const signals = listenForRunSignals();
  // A run that admission could still refuse before its agent starts (a run
  // id taken, attachments too large) starts it the usual way.
  const ahead = request.runId || request.input.attachments?.length
    ? undefined
    : startAgentAhead({
      config: request.config,
      agentsDir: join(dataDir, "agents"),
    });
  try {
    return await runInvocation(invocation, { dataDir, ahead, signals });
  } finally {
    await ahead?.discard();
    signals.stop();
  }
}

/** Runs the checked invocation with the run machinery; returns the exit code. */
async function runInvocation(
  invocation: RunInvocation,
  { dataDir, ahead, signals }: {
    dataDir: string;
    ahead?: HeadStart;
    signals: RunSignals;
  },
): Promise<number> {
  const machinery = await loadRunMachinery();
  const { reaper, openStore } = machinery;
  await reaper.reapLeftoverGroups(join(dataDir, "agents"));
  // A signal before the run exists ends the command (the agent is discarded).
  if (signals.received !== undefined) return signals.received;
  let store: RunStore;
  try {
    store = await openStore({ dataDir });
  } catch (error) {
    return reportFailure(error);
  }
  const assets = machinery.createAssetsHook({ log: () => {} });
  const progress = createProgress({
    enabled: !invocation.json && Deno.stdout.isTerminal() &&
      Deno.stderr.isTerminal(),
    delayMs: progressDelayMs(),
  });
  const reporting = installReporting();
  const manager = machinery.createRunManager({
    agentRegistry: { dataDir, ...reporting },
    locations: {
      ...machinery.runnerLocations(),
      local: machinery.createLocalLocation({ startedAhead: ahead?.take }),
    },
    assets,
    store,
    registry: ahead?.registry ??
      reaper.createReaperRegistry(join(dataDir, "agents")),
    log: progress.log,
  });
  const printer = eventPrinter(invocation.json, progress.done);
  let ending: RunEvent | undefined;
  let outcome: { result?: RunResult; signalExit?: number };
  try {
    outcome = await runToEnd(manager, {
      request: invocation.request,
      onEvent: (event) => {
        if (isTerminalEvent(event)) ending = event;
        printer.print(event);
      },
      signals,
    });
  } catch (error) {
    printer.flush();
    await assets.close();
    await store.close();
    return reportFailure(error);
  } finally {
    reporting.finish();
    progress.done();
  }
  printer.flush();
  const usage = usageLine(ending?.usage);
  // For the person at the terminal; a pipe or file gets the events alone.
  if (usage && Deno.stderr.isTerminal()) {
    Deno.stderr.writeSync(new TextEncoder().encode(usage));
  }
  await assets.close();
  await store.close();
  return exitCodeOf(outcome);
}

/** The part of the run manager {@linkcode runToEnd} uses. */
type Starter = Pick<RunManager, "start">;

/**
 * Starts the run, answers its permission requests on the terminal, cancels
 * it on SIGINT/SIGTERM, and waits for its end.
 */
async function runToEnd(
  manager: Starter,
  { request, onEvent, signals }: {
    request: RunRequest;
    onEvent: (event: RunEvent) => void;
    signals: RunSignals;
  },
): Promise<{ result?: RunResult; signalExit?: number }> {
  const { run } = await manager.start(request, { onEvent });
  // Subscribers added in start()'s task get the run's events from the first.
  run.subscribe(createTerminalApprover({
    answer: (requestId, answer) => {
      run.handle.answerPermission(requestId, answer);
    },
  }));
  signals.onSignal(() => run.handle.cancel());
  const result = await run.done;
  return { result, signalExit: signals.received };
}

/** The exit code of a run that ended with `result` (`signalExit`: cancelled by a signal). */
function exitCodeOf(
  { result, signalExit }: { result?: RunResult; signalExit?: number },
): number {
  if (result?.status === "completed") return 0;
  if (signalExit !== undefined) return signalExit;
  if (AGENT_STOPPED_CODES.has(result?.code ?? "")) return AGENT_STOPPED_EXIT;
  return result?.status === "cancelled" ? 130 : 1;
}

/** How long the agent may take before the progress line shows (`RUNNER_PROGRESS_DELAY_MS`, default 1 s). */
function progressDelayMs(): number {
  const value = Number(Deno.env.get("RUNNER_PROGRESS_DELAY_MS"));
  return Number.isFinite(value) && value >= 0 ? value : 1000;
}

/**
 * Exit code of a run whose agent stopped on its own without answering: after
 * a refused permission, or ended the turn as cancelled.
 */
const AGENT_STOPPED_EXIT = 3;

/** The failure codes that exit {@linkcode AGENT_STOPPED_EXIT}. */
const AGENT_STOPPED_CODES = new Set([
  "run.agent_cancelled",
  "run.permission_rejected",
]);
