/**
 * Reading a run's events over HTTP: stored events first, then live ones,
 * with nothing missed in between (subscribe first, buffer, dedupe by
 * sequence), as SSE or NDJSON.
 *
 * @module
 */

import type { Context } from "hono";
import { RunnerError } from "../errors.ts";
import type { RunEvent } from "../events.ts";
import { isTerminalEvent } from "../events.ts";
import type { ManagedRun } from "../run/manager.ts";
import type { RunStore } from "../store/types.ts";
import { settleWithin } from "../timing.ts";

/** Live events buffered for one reader before it falls back to the store. */
const MAX_PENDING_EVENTS = 10_000;

/** Stored events read at once while a reader catches up. */
const CATCH_UP_PAGE = 1_000;

/** How often a run active in another process is looked at again. */
const OTHER_PROCESS_POLL_MS = 250;

/** A run's events in order, ending after the terminal event. */
export interface RunEventFollower {
  /** The next event, or undefined once the run's events are exhausted. */
  next(): Promise<RunEvent | undefined>;
  /** Stops following (the run keeps going). */
  close(): void;
}

/** Options for {@linkcode followRunEvents}. */
export interface FollowOptions {
  /** The store holding the run's events. */
  store: RunStore;
  /** The run id. */
  runId: string;
  /** The live run, when it is active in this process. */
  run?: ManagedRun;
  /** Only events with a greater sequence. */
  after?: number;
  /** Live events held for a reader that lags before it catches up from the store (default 10 000). */
  maxPendingEvents?: number;
  /**
   * For a run active in another process: ends it when its owner is gone
   * (see `RunStore.failRunIfOrphaned`), so the stream ends with its failure.
   */
  failIfOrphaned?: (runId: string) => Promise<void>;
}

/** What one reader of a run's events holds. */
interface FollowState {
  options: FollowOptions;
  maxPending: number;
  /** Live events delivered while not catching up, not yet read. */
  live: RunEvent[];
  /** Stored events read, not yet handed out. */
  backlog: RunEvent[];
  /** The last sequence handed out. */
  last: number;
  /** Reading the store rather than buffering live events. */
  catchingUp: boolean;
  runDone: boolean;
  finished: boolean;
  wake?: () => void;
  unsubscribe: () => void;
}

/**
 * Follows a run's events from `after`: stored ones, then live ones until the
 * terminal event. A reader that falls more than `maxPendingEvents` behind
 * drops its live buffer, reads the store page by page from its last
 * sequence, and rejoins live delivery: it may lag, never skip.
 */
export function followRunEvents(options: FollowOptions): RunEventFollower {
  const { run } = options;
  const state: FollowState = {
    options,
    maxPending: options.maxPendingEvents ?? MAX_PENDING_EVENTS,
    live: [],
    backlog: [],
    last: options.after ?? 0,
    // Start by catching up: the first read of the store happens only after
    // live delivery is on, which is what makes the hand-over gapless.
    catchingUp: true,
    runDone: !run,
    finished: false,
    unsubscribe: () => {},
  };
  state.unsubscribe = run?.subscribe((event) => onLiveEvent(state, event)) ??
    (() => {});
  run?.done.finally(() => {
    state.runDone = true;
    state.wake?.();
  });
  return {
    next: () => nextEvent(state),
    close: () => finishFollowing(state),
  };
}

/** Buffers a live event, or switches to catching up when the buffer is full. */
function onLiveEvent(state: FollowState, event: RunEvent): void {
  if (!state.catchingUp) {
    if (state.live.length < state.maxPending) state.live.push(event);
    else {
      // Every event a listener sees is already in the store (committed
      // before delivery): drop the buffer and catch up from there.
      state.catchingUp = true;
      state.live.length = 0;
    }
  }
  state.wake?.();
}

function finishFollowing(state: FollowState): void {
  state.finished = true;
  state.unsubscribe();
  state.wake?.();
}

/**
 * Rejoins live delivery, then reads the next page of stored events (live
 * events arriving during the read are kept; those also read are skipped by
 * sequence).
 */
async function readStoredPage(state: FollowState): Promise<void> {
  const { store, runId } = state.options;
  state.catchingUp = false;
  state.live.length = 0;
  state.backlog = await store.getEvents(runId, {
    after: state.last,
    limit: CATCH_UP_PAGE,
  });
  // Still a full page behind: keep reading the store, not buffering.
  if (state.backlog.length === CATCH_UP_PAGE) state.catchingUp = true;
}

async function sleep(state: FollowState, ms?: number): Promise<void> {
  const woken = new Promise<void>((resolve) => state.wake = resolve);
  await (ms === undefined ? woken : settleWithin(woken, ms));
  state.wake = undefined;
}

function take(state: FollowState): RunEvent | undefined {
  return state.backlog.shift() ??
    (state.catchingUp ? undefined : state.live.shift());
}

/** The next event in sequence, waiting for it; undefined once the run is over. */
async function nextEvent(state: FollowState): Promise<RunEvent | undefined> {
  const { store, runId, run } = state.options;
  for (;;) {
    if (state.finished) return undefined;
    const event = take(state);
    if (event) {
      if ((event.sequence ?? 0) <= state.last) continue;
      state.last = event.sequence ?? state.last;
      if (isTerminalEvent(event)) finishFollowing(state);
      return event;
    }
    if (state.catchingUp) {
      await readStoredPage(state);
      continue;
    }
    if (!state.runDone) {
      await sleep(state);
      continue;
    }
    state.backlog = await store.getEvents(runId, {
      after: state.last,
      limit: CATCH_UP_PAGE,
    });
    if (state.backlog.length) continue;
    if (!run && (await store.getRun(runId))?.status === "active") {
      // Active in another process sharing the store (a `runner run`): nothing
      // here can notify us, so look again shortly; end it if its owner is gone.
      await state.options.failIfOrphaned?.(runId);
      await sleep(state, OTHER_PROCESS_POLL_MS);
      continue;
    }
    finishFollowing(state);
    return undefined;
  }
}

/** Wire formats of an event stream. */
export type StreamFormat = "sse" | "ndjson";

/** The content type of each {@linkcode StreamFormat}. */
export const STREAM_CONTENT_TYPES: Record<StreamFormat, string> = {
  sse: "text/event-stream; charset=utf-8",
  ndjson: "application/x-ndjson; charset=utf-8",
};

const KEEPALIVE_MS = 15_000;

/** How long an `EventSource` waits before it reconnects (the SSE `retry:` field). */
export const SSE_RETRY_MS = 3_000;

/**
 * What a stream sends while the run is silent, so proxies with idle timeouts
 * keep the connection: an SSE comment, or an empty line for NDJSON (NDJSON
 * and n8n readers skip blank lines).
 */
export const KEEPALIVES: Record<StreamFormat, string> = {
  sse: ": keepalive\n\n",
  ndjson: "\n",
};

/** Options for {@linkcode eventStreamResponse}. */
export interface StreamBodyOptions {
  /** Sends a keep-alive this often while the run is silent (default 15 s). */
  keepaliveMs?: number;
  /** Called once the stream has ended or the client went away. */
  onEnd?: () => void;
}

/**
 * A response body of text chunks produced by `produce` (undefined ends it).
 * `close` runs when the client disconnects.
 */
export function textStream(
  produce: () => Promise<string | undefined>,
  close: () => void,
  options: { keepalive?: string; keepaliveMs?: number; onEnd?: () => void } =
    {},
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let timer: ReturnType<typeof setInterval> | undefined;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    clearInterval(timer);
    close();
    options.onEnd?.();
  };
  return new ReadableStream<Uint8Array>({
    start(controller) {
      if (options.keepalive) {
        timer = setInterval(() => {
          try {
            controller.enqueue(encoder.encode(options.keepalive));
          } catch { /* closed */ }
        }, options.keepaliveMs ?? KEEPALIVE_MS);
      }
    },
    async pull(controller) {
      const text = await produce();
      if (text === undefined) {
        end();
        controller.close();
        return;
      }
      controller.enqueue(encoder.encode(text));
    },
    cancel() {
      end();
    },
  });
}

/**
 * Formats one event for `format`. SSE messages are named by the event type
 * (`event:`), so a browser's `EventSource.onmessage` sees none of them;
 * `retryMs` adds a `retry:` field (sent with a stream's first message).
 */
export function formatEvent(
  event: RunEvent,
  format: StreamFormat,
  retryMs?: number,
): string {
  const json = JSON.stringify(event);
  if (format === "ndjson") return json + "\n";
  const retry = retryMs === undefined ? "" : `retry: ${retryMs}\n`;
  return `${retry}id: ${
    event.sequence ?? ""
  }\nevent: ${event.type}\ndata: ${json}\n\n`;
}

/** A streaming response of a run's events in `format`. */
export function eventStreamResponse(
  follower: RunEventFollower,
  format: StreamFormat,
  options: StreamBodyOptions & {
    status?: number;
    headers?: Record<string, string>;
  } = {},
): Response {
  let first = true;
  const body = textStream(
    async () => {
      const event = await follower.next();
      if (!event) return undefined;
      const retry = first ? SSE_RETRY_MS : undefined;
      first = false;
      return formatEvent(event, format, retry);
    },
    () => follower.close(),
    {
      keepalive: KEEPALIVES[format],
      keepaliveMs: options.keepaliveMs,
      onEnd: options.onEnd,
    },
  );
  return new Response(body, {
    status: options.status ?? 200,
    headers: {
      "content-type": STREAM_CONTENT_TYPES[format],
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
      ...options.headers,
    },
  });
}

/**
 * The sequence a read resumes after: the larger of `?after=` and the
 * `Last-Event-ID` header, so an `EventSource` whose URL carries `?after=0`
 * repeats nothing when it reconnects.
 */
export function parseAfterSequence(c: Context): number {
  const sequences = [c.req.query("after"), c.req.header("last-event-id")]
    .filter((text): text is string => text !== undefined && text !== "")
    .map((text) => {
      const after = Number(text);
      if (!Number.isInteger(after) || after < 0) {
        throw new RunnerError(
          "http.bad_request",
          "after (or Last-Event-ID) must be a non-negative integer sequence.",
        );
      }
      return after;
    });
  return Math.max(0, ...sequences);
}
