/**
 * Reading a run's events over HTTP: stored events first, then live ones,
 * with nothing missed in between (subscribe first, buffer, dedupe by
 * sequence), as SSE or NDJSON.
 *
 * @module
 */

import type { RunEvent } from "../events.ts";
import { isTerminalEvent } from "../events.ts";
import type { ManagedRun } from "../run/manager.ts";
import type { RunStore } from "../store/types.ts";
import { settleWithin } from "../timing.ts";

/** Live events buffered for one reader before it falls back to the store. */
const MAX_PENDING_EVENTS = 10_000;

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
}

/** Follows a run's events from `after`: stored ones, then live ones until the terminal event. */
export function followRunEvents(options: FollowOptions): RunEventFollower {
  const { store, runId, run } = options;
  const pending: RunEvent[] = [];
  let last = options.after ?? 0;
  let wake: (() => void) | undefined;
  let finished = false;
  let runDone = !run;
  // Subscribing before reading the store is what makes the hand-over gapless.
  let overflowed = false;
  const unsubscribe = run?.subscribe((event) => {
    // A client that does not read would grow this without bound: past the
    // cap, drop the buffer and catch up from the store (it holds every event
    // a listener has seen).
    if (pending.length >= MAX_PENDING_EVENTS) {
      overflowed = true;
      pending.length = 0;
    } else {
      pending.push(event);
    }
    wake?.();
  }) ?? (() => {});
  run?.done.finally(() => {
    runDone = true;
    wake?.();
  });
  // Read right after subscribing; live events meanwhile are deduplicated.
  let stored: Promise<() => RunEvent[]> | undefined = settledEvents(
    store.getEvents(runId, { after: last }),
  );

  function finish() {
    finished = true;
    unsubscribe();
    wake?.();
  }

  return {
    async next() {
      if (stored) pending.unshift(...await stored.then((read) => read()));
      stored = undefined;
      for (;;) {
        if (finished) return undefined;
        if (overflowed && !pending.length) {
          overflowed = false;
          pending.push(...await store.getEvents(runId, { after: last }));
        }
        const event = pending.shift();
        if (event) {
          if ((event.sequence ?? 0) <= last) continue;
          last = event.sequence ?? last;
          if (isTerminalEvent(event)) finish();
          return event;
        }
        if (runDone) {
          const rest = await store.getEvents(runId, { after: last });
          if (rest.length) {
            pending.push(...rest);
            continue;
          }
          if (!run && (await store.getRun(runId))?.status === "active") {
            // Active in another process sharing the store (a `runner run`):
            // nothing here can notify us, so look again shortly.
            await settleWithin(
              new Promise<void>((resolve) => wake = resolve),
              OTHER_PROCESS_POLL_MS,
            );
            wake = undefined;
            continue;
          }
          finish();
          return undefined;
        }
        await new Promise<void>((resolve) => wake = resolve);
        wake = undefined;
      }
    },
    close: finish,
  };
}

/** A read whose failure is only thrown when it is looked at. */
function settledEvents(
  read: Promise<RunEvent[]>,
): Promise<() => RunEvent[]> {
  return read.then((events) => () => events, (error) => () => {
    throw error;
  });
}

/** Wire formats of an event stream. */
export type StreamFormat = "sse" | "ndjson";

/** The content type of each {@linkcode StreamFormat}. */
export const STREAM_CONTENT_TYPES: Record<StreamFormat, string> = {
  sse: "text/event-stream; charset=utf-8",
  ndjson: "application/x-ndjson; charset=utf-8",
};

const KEEPALIVE_MS = 15_000;

/** Options for {@linkcode streamBody}. */
export interface StreamBodyOptions {
  /** Sends an SSE comment this often so proxies keep the connection (SSE only). */
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

/** Formats one event for `format`. */
export function formatEvent(event: RunEvent, format: StreamFormat): string {
  const json = JSON.stringify(event);
  if (format === "ndjson") return json + "\n";
  return `id: ${event.sequence ?? ""}\nevent: ${event.type}\ndata: ${json}\n\n`;
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
  const body = textStream(
    async () => {
      const event = await follower.next();
      return event ? formatEvent(event, format) : undefined;
    },
    () => follower.close(),
    {
      keepalive: format === "sse" ? ": keepalive\n\n" : undefined,
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
