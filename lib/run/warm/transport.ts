/**
 * One agent's byte streams shared by the runs that use it in turn (warm
 * agents, `docs/runs.md`). Each run borrows a view: its own stdin and stdout
 * over the same process. Output belongs to whoever holds the agent when a
 * line starts: the view, or the idle side, which discards it. A line that
 * began while the agent was idle is never handed to the next run, and a run
 * sees nothing until it has written its first message.
 *
 * @module
 */

import { settleWithin } from "../../timing.ts";
import type { AgentTransport } from "../types.ts";

/** An agent process whose streams outlive the runs that use them. */
export interface SharedAgent {
  /** A run's view of the agent; throws when another view is still lent. */
  lend(options?: { quietUntilFirstWrite?: boolean }): AgentTransport;
  /** Ends the current view (its stdout closes); output goes idle. */
  detach(): void;
  /** Why the agent must not serve another run, once something disqualified it. */
  readonly unusable: string | undefined;
  /** Whether the agent (or its stdout) has gone. */
  readonly gone: boolean;
  /** Resolves once the agent is gone or unusable. */
  readonly spoiled: Promise<void>;
  /** Closes stdin and tears the agent down (the location's teardown). */
  teardown(): Promise<void>;
}

/** Options for {@linkcode shareAgent}. */
export interface ShareAgentOptions {
  /** Structured log (never agent output). */
  log: (entry: Record<string, unknown>) => void;
}

/** Longest idle line kept for a look at what it is; longer ones are dropped unread. */
const IDLE_LINE_LIMIT = 64 * 1024;
/** Idle lines logged one by one before the log thins out. */
const IDLE_LOG_LINES = 20;
const NEWLINE = 0x0a;
const OPEN_BRACE = 0x7b;

/** One run's borrowed streams. */
interface View {
  controller?: ReadableStreamDefaultController<Uint8Array>;
  /** Output goes to the view (false: discarded until the run writes). */
  forwarding: boolean;
  closed: boolean;
}

/** Who owns the line being read: a run's view, the idle side, or nobody (a fragment). */
interface LineState {
  /** Undefined until the line's first byte arrives. */
  owner?: "view" | "idle" | "fragment";
  /** The view that owns the line. */
  view?: View;
  /** The view's line has shown its first non-blank byte. */
  classified: boolean;
  /** An idle line so far (up to the limit). */
  idleBytes: Uint8Array[];
  idleSize: number;
}

/** The state of one shared agent. */
interface Shared {
  raw: AgentTransport;
  log: ShareAgentOptions["log"];
  writer: WritableStreamDefaultWriter<Uint8Array>;
  view?: View;
  line: LineState;
  /** The agent has written a protocol line (banners before it are tolerated). */
  spokeProtocol: boolean;
  /** Idle lines discarded so far. */
  discarded: number;
  unusable?: string;
  /** The agent exited or its stdout ended: it cannot serve another run. */
  gone: boolean;
  /** Its stdout ended: a view lent now gets nothing. */
  ended: boolean;
  spoiled: PromiseWithResolvers<void>;
  tornDown?: Promise<void>;
}

/** Wraps a launched agent so that runs can borrow it one after another. */
export function shareAgent(
  raw: AgentTransport,
  options: ShareAgentOptions,
): SharedAgent {
  const shared: Shared = {
    raw,
    log: options.log,
    writer: raw.stdin.getWriter(),
    line: newLine(),
    spokeProtocol: false,
    discarded: 0,
    gone: false,
    ended: false,
    spoiled: Promise.withResolvers<void>(),
  };
  pump(shared);
  raw.exited.then(() => markGone(shared), () => markGone(shared));
  return {
    lend: (lendOptions) => lendView(shared, lendOptions),
    detach: () => detachView(shared),
    get unusable() {
      return shared.unusable;
    },
    get gone() {
      return shared.gone;
    },
    spoiled: shared.spoiled.promise,
    teardown: () => teardownShared(shared),
  };
}

function lendView(
  shared: Shared,
  options: { quietUntilFirstWrite?: boolean } = {},
): AgentTransport {
  if (shared.view && !shared.view.closed) {
    throw new Error("the agent is still lent to another run");
  }
  const view: View = {
    forwarding: !options.quietUntilFirstWrite,
    closed: false,
  };
  shared.view = view;
  const stdout = new ReadableStream<Uint8Array>({
    start(controller) {
      view.controller = controller;
      if (shared.ended) closeView(view);
    },
    cancel() {
      if (shared.view === view) detachView(shared);
    },
  });
  const stdin = new WritableStream<Uint8Array>({
    async write(chunk) {
      if (view.closed || shared.view !== view) {
        throw new Error("this run no longer holds the agent");
      }
      view.forwarding = true;
      await shared.writer.write(chunk);
    },
  });
  const { raw } = shared;
  return {
    stdin,
    stdout,
    exited: raw.exited,
    stderrTail: () => raw.stderrTail(),
    teardown: () => teardownShared(shared),
  };
}

function detachView(shared: Shared): void {
  const view = shared.view;
  if (!view) return;
  shared.view = undefined;
  closeView(view);
}

function closeView(view: View): void {
  if (view.closed) return;
  view.closed = true;
  try {
    view.controller?.close();
  } catch { /* already closed by its reader */ }
}

/**
 * Notes that the agent cannot serve another run. The current view still
 * gets whatever the agent wrote before it exited: it closes at end of output.
 */
function markGone(shared: Shared): void {
  if (shared.gone) return;
  shared.gone = true;
  shared.spoiled.resolve();
}

function disqualify(shared: Shared, reason: string): void {
  if (shared.unusable) return;
  shared.unusable = reason;
  shared.log({ msg: "warm agent not reusable", reason });
  shared.spoiled.resolve();
}

async function teardownShared(shared: Shared): Promise<void> {
  shared.tornDown ??= (async () => {
    if (shared.view) closeView(shared.view);
    // Like a run's teardown: stdin first (many agents exit on EOF), then the group.
    await settleWithin(shared.writer.close().catch(() => {}), 500);
    await shared.raw.teardown();
    markGone(shared);
  })();
  return await shared.tornDown;
}

/** Reads the agent's stdout for its whole life, handing each line to its owner. */
async function pump(shared: Shared): Promise<void> {
  try {
    for await (const chunk of shared.raw.stdout) route(shared, chunk);
  } catch {
    // The pipe closed under us (teardown): the agent is gone either way.
  }
  if (shared.line.owner === "idle") finishIdleLine(shared);
  shared.ended = true;
  if (shared.view) closeView(shared.view);
  markGone(shared);
}

function newLine(): LineState {
  return { classified: false, idleBytes: [], idleSize: 0 };
}

/**
 * Splits a chunk at line ends and gives each piece to the owner of its line;
 * consecutive lines of the run's view go to it as one piece (a chunk holds
 * hundreds of small lines, and the view's reader splits lines itself).
 */
function route(shared: Shared, chunk: Uint8Array): void {
  const toView: ViewSpan = { from: -1 };
  let start = 0;
  while (start < chunk.length) {
    if (!shared.line.owner) claimLine(shared);
    const end = chunk.indexOf(NEWLINE, start);
    const stop = end < 0 ? chunk.length : end + 1;
    deliver(shared, { chunk, start, stop, toView });
    if (end >= 0) {
      if (shared.line.owner === "idle") finishIdleLine(shared);
      shared.line = newLine();
    }
    start = stop;
  }
  flushView(chunk, toView, chunk.length);
}

/** Bytes of the chunk being routed that still go to a view, from `from`. */
interface ViewSpan {
  from: number;
  view?: View;
}

/** Hands the view its pending bytes of `chunk`, up to `to`. */
function flushView(chunk: Uint8Array, span: ViewSpan, to: number): void {
  if (span.from >= 0 && to > span.from) {
    span.view!.controller?.enqueue(chunk.subarray(span.from, to));
  }
  span.from = -1;
}

/** Decides who owns the line that starts now. */
function claimLine(shared: Shared): void {
  const view = shared.view;
  if (view && !view.closed && view.forwarding) {
    shared.line.owner = "view";
    shared.line.view = view;
  } else {
    shared.line.owner = "idle";
  }
}

function deliver(
  shared: Shared,
  piece: { chunk: Uint8Array; start: number; stop: number; toView: ViewSpan },
): void {
  const { line } = shared;
  const { chunk, start, stop, toView } = piece;
  if (line.owner === "view" && !line.view!.closed) {
    if (!line.classified) {
      classifyViewLine(shared, chunk.subarray(start, stop));
    }
    if (toView.from < 0 || toView.view !== line.view) {
      flushView(chunk, toView, start);
      toView.from = start;
      toView.view = line.view;
    }
    return;
  }
  flushView(chunk, toView, start);
  if (line.owner === "view") {
    // The run let go mid-line: the rest of the line is nobody's.
    line.owner = "fragment";
  } else if (line.owner === "idle") {
    const bytes = chunk.subarray(start, stop);
    if (line.idleSize <= IDLE_LINE_LIMIT) line.idleBytes.push(bytes);
    line.idleSize += bytes.length;
  }
}

/** Notes protocol or garbage from the first non-blank byte of a run's line. */
function classifyViewLine(shared: Shared, piece: Uint8Array): void {
  for (const byte of piece) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === NEWLINE) {
      continue;
    }
    shared.line.classified = true;
    if (byte === OPEN_BRACE) shared.spokeProtocol = true;
    else if (shared.spokeProtocol) {
      disqualify(shared, "the agent printed non-protocol output on stdout");
    }
    return;
  }
}

/** Looks at a line that arrived while no run held the agent, then drops it. */
function finishIdleLine(shared: Shared): void {
  const { line } = shared;
  if (line.idleSize <= 0) return;
  if (line.idleSize > IDLE_LINE_LIMIT) {
    logDiscard(shared, { bytes: line.idleSize });
    return;
  }
  const text = new TextDecoder().decode(joinBytes(line.idleBytes)).trim();
  line.idleSize = 0;
  if (!text) return;
  let message: Record<string, unknown> | undefined;
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      message = parsed;
    }
  } catch { /* garbage, below */ }
  if (!message) {
    disqualify(shared, "the agent printed non-protocol output while idle");
    return;
  }
  if (typeof message.method === "string" && message.id !== undefined) {
    disqualify(shared, `the agent sent a ${message.method} request while idle`);
    return;
  }
  const update = (message.params as { update?: { sessionUpdate?: unknown } })
    ?.update;
  logDiscard(shared, { method: message.method, kind: update?.sessionUpdate });
}

/** Logs a discarded idle line; past a few, only every hundredth (a chatty agent). */
function logDiscard(shared: Shared, what: Record<string, unknown>): void {
  const count = ++shared.discarded;
  if (count > IDLE_LOG_LINES && count % 100 !== 0) return;
  shared.log({ msg: "agent output while idle discarded", ...what, count });
}

function joinBytes(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const size = parts.reduce((sum, part) => sum + part.length, 0);
  const all = new Uint8Array(size);
  let offset = 0;
  for (const part of parts) {
    all.set(part, offset);
    offset += part.length;
  }
  return all;
}
