/**
 * The TCP accept loop every listener of the runner shares (the HTTP API, the
 * daemon hub, the assets endpoints, the daemon's MCP proxy). It holds at most
 * `maxConnections` connections; at the cap a new one first closes the oldest
 * idle connection (one still waiting for its request head, or idle between
 * requests), so slow or silent clients cannot lock real ones out; only when
 * every connection is busy is the new one answered `refusal` and closed. An
 * accept error (out of file descriptors) never ends or stalls the loop: it is
 * logged, an idle connection is closed to free a descriptor, and accepting
 * resumes after a short pause. See `docs/http-api.md` ("Limits").
 *
 * @module
 */

import type { Logger } from "../log.ts";
import { delay, settleWithin } from "../timing.ts";

/** What a listener has done, for `/metrics`. */
export interface ListenerStats {
  /** Connections open now. */
  open: number;
  /** The connection cap. */
  max: number;
  /** Idle connections closed to make room for a new one. */
  evicted: number;
  /** New connections refused because every connection was busy. */
  refused: number;
  /** Accepts that failed (e.g. out of file descriptors). */
  acceptErrors: number;
}

/** One accepted connection's place under the cap. */
export interface Slot {
  /** The connection. */
  conn: Deno.Conn;
  /** Marks it idle: waiting for a request (head), so it may be closed to make room. */
  idle(): void;
  /** Marks it busy: answering a request, or handed over (upgraded). */
  busy(): void;
  /** Frees the place (call once the connection is closed; repeatable). */
  release(): void;
}

/** Closes a connection to make room; resolves once its descriptor is free. */
export type Evict = () => Promise<void> | void;

/** Options of {@linkcode listenTcp}. */
export interface TcpListenerOptions {
  /** The listen address. */
  hostname: string;
  /** The listen port (0: any free port). */
  port: number;
  /** Connections at most. */
  maxConnections: number;
  /** What the listener is, in its log lines (`http`, `hub`, ...). */
  name: string;
  /**
   * Serves a new connection (idle until marked busy) and returns how to close
   * it to make room (its place is free from then on), resolving once its
   * descriptor is.
   */
  onConnection(slot: Slot): Evict;
  /** The raw answer of a connection refused because every connection is busy. */
  refusal: Uint8Array;
  /** Where cap and accept failures are logged (at most one line per kind every 10 s). */
  log?: Logger;
}

/** A listening {@linkcode listenTcp}. */
export interface TcpListener {
  /** The bound address. */
  hostname: string;
  /** The bound port. */
  port: number;
  /** What the listener has done. */
  stats(): ListenerStats;
  /** Stops accepting (open connections are left to their owners). */
  close(): Promise<void>;
}

/** Refused connections that may wait at once for the client to read their answer. */
const MAX_LINGERING = 64;
/** How long a refused connection waits for the client to read its answer. */
const LINGER_MS = 1000;
/** How long the accept loop waits for a closed connection's descriptor (or a refusal's answer). */
const EVICT_WAIT_MS = 1000;
/** The longest pause after a failed accept. */
const MAX_ACCEPT_BACKOFF_MS = 500;
/** At most one log line per kind this often; counts are summed in between. */
const LOG_EVERY_MS = 10_000;

/** Starts listening (bound before it returns; throws when it cannot bind). */
export function listenTcp(options: TcpListenerOptions): TcpListener {
  const listener = Deno.listen({
    hostname: options.hostname,
    port: options.port,
  });
  const addr = listener.addr as Deno.NetAddr;
  const table = new ConnectionTable(options);
  const state = { closed: false };
  const accepting = acceptLoop(listener, table, state);
  return {
    hostname: addr.hostname,
    port: addr.port,
    stats: () => table.stats(),
    async close() {
      if (state.closed) return;
      state.closed = true;
      closeQuietly(listener);
      await accepting;
      table.notes.flush();
    },
  };
}

/**
 * Accepts until the listener closes. A failed accept (out of descriptors)
 * closes an idle connection to get one back, or else pauses a little longer
 * each time; it never ends the loop.
 */
async function acceptLoop(
  listener: Deno.Listener,
  table: ConnectionTable,
  state: { closed: boolean },
): Promise<void> {
  let backoff = 0;
  while (!state.closed) {
    let conn: Deno.Conn;
    try {
      conn = await listener.accept();
    } catch (error) {
      if (state.closed || error instanceof Deno.errors.BadResource) return;
      table.acceptFailed(error);
      if (await table.evictOldestIdle()) continue;
      backoff = Math.min(MAX_ACCEPT_BACKOFF_MS, Math.max(10, backoff * 2));
      await delay(backoff);
      continue;
    }
    backoff = 0;
    await table.admit(conn);
  }
}

/** The connections a listener holds, and what it did to hold no more. */
class ConnectionTable {
  /** The log lines about the cap and failed accepts. */
  readonly notes: ThrottledNotes;
  #options: TcpListenerOptions;
  #counts = { evicted: 0, refused: 0, acceptErrors: 0 };
  /** Open connections, each with how to close it to make room. */
  #open = new Map<Slot, Evict>();
  /** Idle connections, oldest idle first (re-inserted when they go idle). */
  #idle = new Set<Slot>();
  #lingering = 0;

  constructor(options: TcpListenerOptions) {
    this.#options = options;
    this.notes = throttledNotes(options);
  }

  stats(): ListenerStats {
    return {
      open: this.#open.size,
      max: this.#options.maxConnections,
      ...this.#counts,
    };
  }

  acceptFailed(error: unknown): void {
    this.#counts.acceptErrors++;
    this.notes.acceptFailed(error);
  }

  /** Takes a new connection: in a free place, in an idle one's, or refused. */
  async admit(conn: Deno.Conn): Promise<void> {
    const full = this.#open.size >= this.#options.maxConnections;
    if (full && !await this.evictOldestIdle()) return this.#refuse(conn);
    const slot = this.#slot(conn);
    this.#open.set(slot, () => closeQuietly(conn));
    this.#idle.add(slot);
    try {
      this.#open.set(slot, this.#options.onConnection(slot));
    } catch {
      slot.release();
      closeQuietly(conn);
    }
  }

  /**
   * Closes the connection idle the longest and waits (briefly) until its
   * descriptor is free, so a burst never holds more than the cap; false when
   * none is idle.
   */
  async evictOldestIdle(): Promise<boolean> {
    const oldest = this.#idle.values().next();
    if (oldest.done) return false;
    const slot = oldest.value;
    const evict = this.#open.get(slot);
    slot.release();
    this.#counts.evicted++;
    this.notes.evicted();
    let evicted: Promise<void> | void = undefined;
    try {
      evicted = evict?.();
    } catch { /* closed below */ }
    if (!await settleWithin(Promise.resolve(evicted), EVICT_WAIT_MS)) {
      closeQuietly(slot.conn);
    }
    return true;
  }

  /** Answers `refusal`, then closes (after a moment, for a bounded few). */
  async #refuse(conn: Deno.Conn): Promise<void> {
    this.#counts.refused++;
    this.notes.refused();
    const written = writeAnswer(conn, this.#options.refusal);
    if (!await settleWithin(written, EVICT_WAIT_MS)) return closeQuietly(conn);
    if (this.#lingering >= MAX_LINGERING) return closeQuietly(conn);
    this.#lingering++;
    void lingerAndClose(conn).finally(() => this.#lingering--);
  }

  #slot(conn: Deno.Conn): Slot {
    const open = this.#open;
    const idle = this.#idle;
    let released = false;
    const slot: Slot = {
      conn,
      idle() {
        if (released) return;
        idle.delete(slot);
        idle.add(slot);
      },
      busy() {
        idle.delete(slot);
      },
      release() {
        if (released) return;
        released = true;
        idle.delete(slot);
        open.delete(slot);
      },
    };
    return slot;
  }
}

/** Writes a raw answer; a client that is gone is no failure. */
async function writeAnswer(conn: Deno.Conn, answer: Uint8Array) {
  try {
    let written = 0;
    while (written < answer.length) {
      written += await conn.write(answer.subarray(written));
    }
  } catch { /* the client is gone */ }
}

function closeQuietly(closable: { close(): void }): void {
  try {
    closable.close();
  } catch { /* closed */ }
}

/**
 * Ends the sending side, then waits (briefly) for the client to close before
 * closing: closing with its request unread would reset the connection, and
 * the client could lose the answer.
 */
async function lingerAndClose(conn: Deno.Conn): Promise<void> {
  try {
    await (conn as Deno.TcpConn).closeWrite();
    const drained = (async () => {
      const sink = new Uint8Array(4096);
      while (await conn.read(sink) !== null) { /* discard */ }
    })().catch(() => {});
    await settleWithin(drained, LINGER_MS);
  } catch { /* the client is gone */ }
  closeQuietly(conn);
}

/** Log lines about the cap and accept failures, at most one per kind every {@linkcode LOG_EVERY_MS}. */
interface ThrottledNotes {
  /** Notes an idle connection closed to make room. */
  evicted(): void;
  /** Notes a refused connection. */
  refused(): void;
  /** Notes a failed accept. */
  acceptFailed(error: unknown): void;
  /** Writes what is still pending. */
  flush(): void;
}

function throttledNotes(options: TcpListenerOptions): ThrottledNotes {
  const { log, name, maxConnections } = options;
  const kinds = {
    evicted: throttle((count) =>
      log?.({
        msg: "idle connections closed at the cap",
        level: "warn",
        listener: name,
        max_connections: maxConnections,
        closed: count,
      })
    ),
    refused: throttle((count) =>
      log?.({
        msg: "connections refused at the cap",
        level: "warn",
        listener: name,
        max_connections: maxConnections,
        refused: count,
      })
    ),
    acceptFailed: throttle((count, error) =>
      log?.({
        msg: "accepting connections failed",
        level: "error",
        listener: name,
        failures: count,
        error: error instanceof Error ? error.message : String(error),
        hint: /os error 2[34]\b/.test(String(error))
          ? "out of file descriptors: raise the open-file limit or lower --max-connections"
          : undefined,
      })
    ),
  };
  return {
    evicted: () => kinds.evicted.add(1),
    refused: () => kinds.refused.add(1),
    acceptFailed: (error) => kinds.acceptFailed.add(1, error),
    flush() {
      for (const kind of Object.values(kinds)) kind.flush();
    },
  };
}

/** Sums events and writes them at most once every {@linkcode LOG_EVERY_MS}. */
function throttle(write: (count: number, last: unknown) => void) {
  let pending = 0;
  let last: unknown;
  let lastWrite = -Infinity;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (pending === 0) return;
    write(pending, last);
    pending = 0;
    lastWrite = performance.now();
  };
  return {
    add(count: number, detail?: unknown) {
      pending += count;
      last = detail;
      const wait = lastWrite + LOG_EVERY_MS - performance.now();
      if (wait <= 0) return flush();
      if (timer === undefined) {
        timer = setTimeout(flush, wait);
        Deno.unrefTimer(timer);
      }
    },
    flush,
  };
}
