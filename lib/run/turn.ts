/**
 * Prompt turns: the first input, then each queued follow-up (steering) on
 * the same session, each turn ending after the agent's late updates.
 *
 * @module
 */

import type { AgentConnection } from "../acp/client.ts";
import { RunnerError } from "../errors.ts";
import { settleWithin } from "../timing.ts";
import { addUsage } from "../events.ts";
import { type RunContext, untilAborted } from "./context.ts";
import { TextBuilder, type TurnState } from "./events.ts";
import { buildPrompt, type RunInput } from "./prompt.ts";
import { TURN_STARTED, turnStartedData } from "./turn_started.ts";
import { releaseLiveUpdates } from "./startup.ts";
import {
  type FailedTool,
  permissionRejectedError,
  type RejectedPermission,
  toolFailedError,
} from "./unanswered.ts";

/** What the turns of a run produced. */
export interface TurnsOutcome {
  /** The stop reason of the last turn. */
  stopReason: string;
  /** The assistant text of each turn that had any. */
  texts: TextBuilder[];
  /** The run's last permission request answered reject or cancelled. */
  rejectedPermission?: RejectedPermission;
  /** The run's last tool call that ended with status `failed`. */
  failedTool?: FailedTool;
}

/** Runs the first input, then drains the steering queue turn by turn. */
export async function runTurns(
  run: RunContext,
  conn: AgentConnection,
): Promise<TurnsOutcome> {
  let input: RunInput = run.options.input;
  let turn = 1;
  const texts: TextBuilder[] = [];
  let stopReason = "end_turn";
  for (;;) {
    const result = await runTurn({ run, conn, input, turn });
    // A cancel that lands in the quiet window after the answer still wins.
    if (run.abort.signal.aborted) throw run.abort.signal.reason;
    stopReason = result.stopReason;
    if (!result.text.empty) texts.push(result.text);
    // The queue closes in the same synchronous step that finds it empty (or
    // ends the turns): a later follow-up gets "closed" and a run of its own.
    const next = stopReason === "cancelled" ? undefined : run.queue.shift();
    if (!next) {
      run.closed = true;
      break;
    }
    run.log({
      msg: "steering turn",
      run_id: run.options.runId,
      queued: run.queue.length,
    });
    input = next;
    turn += 1;
  }
  return {
    stopReason,
    texts,
    rejectedPermission: run.rejectedPermission,
    failedTool: run.failedTool,
  };
}

/**
 * The final assistant text, or the error for turns that did not answer. A
 * run without text is explained by a refused permission, else by a failed
 * tool, whatever the stop reason; a turn ended `cancelled` after a refusal is
 * the refusal too (agents end it either way).
 */
export function finalAnswer(
  { stopReason, texts, rejectedPermission, failedTool }: TurnsOutcome,
): TextBuilder {
  const unanswered = !texts.length;
  if (rejectedPermission && (unanswered || stopReason === "cancelled")) {
    throw permissionRejectedError(rejectedPermission);
  }
  if (failedTool && unanswered) throw toolFailedError(failedTool);
  if (stopReason === "refusal") {
    throw new RunnerError(
      "acp.refused",
      "The agent refused to answer this prompt (stop reason: refusal). Rephrase the request.",
    );
  }
  if (stopReason === "cancelled") {
    // Nobody asked for it (a cancel of ours ends the run before this).
    throw new RunnerError(
      "run.agent_cancelled",
      "The agent ended the turn as cancelled without being asked to. Its stderr may say why; retry, or rephrase the request.",
    );
  }
  if (unanswered) {
    throw new RunnerError(
      "acp.empty_response",
      "The agent finished without any assistant text. Check the agent's login and model settings; its stderr may say more.",
    );
  }
  return texts[texts.length - 1];
}

interface TurnOptions {
  run: RunContext;
  conn: AgentConnection;
  input: RunInput;
  /** The turn's number in the run, from 1; later turns are follow-ups. */
  turn: number;
}

async function runTurn(
  { run, conn, input, turn }: TurnOptions,
): Promise<{ stopReason: string; text: TextBuilder }> {
  const { config } = run;
  const followUp = turn > 1;
  const { blocks } = buildPrompt({
    input,
    capabilities: run.promptCapabilities,
    limits: {
      maxAttachmentBytes: config.maxAttachmentMb * 1024 * 1024,
      maxPromptBytes: config.maxPromptMb * 1024 * 1024,
    },
    prefixText: followUp ? undefined : joinPrefix(
      run.options.promptPrefix,
      run.transport?.promptPrefix,
    ),
    followUp,
  });
  // Stored like every event, so every reader of the run sees the follow-up.
  if (followUp) {
    run.emitter.emit(TURN_STARTED, turnStartedData(turn, input, run.secrets));
  }
  if (run.replaying) await endReplay(run);
  const current: TurnState = {
    text: new TextBuilder(),
    startedTools: new Map(),
  };
  run.turn = current;
  run.answeredAt = undefined;
  run.prompting = true;
  const prompting = conn.prompt({ sessionId: run.sessionId!, prompt: blocks });
  prompting.then(() => run.answeredAt ??= performance.now(), () => {})
    .finally(() => run.prompting = false);
  let stopReason: string;
  try {
    const answer = await untilAborted(run, prompting);
    stopReason = answer.stopReason;
    // Each turn's tokens count once, also in a steered run's later turns.
    run.usage = addUsage(run.usage, answer.usage);
  } catch (error) {
    if (run.abort.signal.aborted) await cancelTurn(run, conn, prompting);
    releaseLiveUpdates(run);
    throw error;
  }
  run.log({ msg: "turn answered", stop_reason: stopReason });
  await quietWindow(
    run,
    config.lateUpdateMs,
    Math.min(FIRST_LATE_UPDATE_MS, config.lateUpdateMs),
  );
  run.answeredAt = undefined;
  releaseLiveUpdates(run);
  run.turn = undefined;
  run.emitter.flush(); // the last text reaches the turn's message
  if (!current.text.empty) {
    // The whole text, joined once: every consumer gets the answer from the
    // completion (LangBot reads it there), not only from the deltas.
    run.emitter.emit("message.completed", {
      message: { role: "assistant", content: current.text.toString() },
    });
  }
  return { stopReason, text: current.text };
}

async function cancelTurn(
  run: RunContext,
  conn: AgentConnection,
  prompting: Promise<unknown>,
) {
  await conn.cancel(run.sessionId!);
  await settleWithin(prompting, run.config.cancelGrace * 1000);
}

/**
 * Agents may answer `session/load` while still replaying history (gemini-cli
 * does): nothing before our prompt belongs to the turn, so the replay stays
 * suppressed until it has gone quiet; the prompt is sent right after.
 */
async function endReplay(run: RunContext) {
  await quietWindow(run, run.config.replayQuietMs);
  if (run.abort.signal.aborted) throw run.abort.signal.reason;
  run.replaying = false;
  if (run.replayedUpdates) {
    run.log({ msg: "replayed updates dropped", count: run.replayedUpdates });
  }
}

/**
 * After a prompt answer the turn first waits only this long (ms) for a late
 * update: most agents send none, and those that do send the first one right
 * after answering. Once one arrives the quiet window is the full
 * `late-update-ms`.
 */
const FIRST_LATE_UPDATE_MS = 10;

/**
 * Waits until the agent has sent nothing for `quiet` ms (at most 10 × that),
 * unless it exits or the run is cancelled. With `first`, the wait ends
 * already after `first` ms without any update; the first update that arrives
 * in time makes it `quiet` from then on (adaptive: silent agents pay `first`).
 */
async function quietWindow(run: RunContext, quiet: number, first = quiet) {
  const limit = performance.now() + quiet * 10;
  const interrupted = Promise.race([
    run.aborted,
    run.transport?.exited ?? new Promise<never>(() => {}),
  ]);
  interrupted.catch(() => {});
  let stop = false;
  interrupted.then(() => stop = true, () => stop = true);
  const begin = performance.now();
  // A late update may already have come between the answer and now.
  const early = run.lastUpdateAt > (run.answeredAt ?? begin);
  const start = Math.max(run.lastUpdateAt, begin);
  run.lastUpdateAt = start;
  run.awaitingQuiet = true;
  try {
    while (!stop) {
      const now = performance.now();
      const window = early || run.lastUpdateAt > start ? quiet : first;
      const wait = Math.min(run.lastUpdateAt + window - now, limit - now);
      if (wait <= 0) break;
      await settleWithin(interrupted, wait);
    }
  } finally {
    run.awaitingQuiet = false;
  }
}

function joinPrefix(...parts: Array<string | undefined>): string | undefined {
  const present = parts.filter((part): part is string => Boolean(part));
  return present.length ? present.join("\n\n") : undefined;
}
