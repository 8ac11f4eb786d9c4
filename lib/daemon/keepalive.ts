/**
 * The daemon's keep-alive: pings the hub at an interval and declares the
 * connection dead when no hub frame follows an expected answer (a ping, the
 * hello, our close) within a timeout. Knows nothing of sockets or logs.
 *
 * @module
 */

/** Options of {@linkcode startKeepAlive}. */
export interface KeepAliveOptions {
  /** Sends one `daemon.ping`; returns false when it could not be sent. */
  sendPing(): boolean;
  /** Called when no hub frame came within `timeoutMs` of an expected answer. */
  onDead(): void;
  /** How often to ping once {@linkcode KeepAlive.startPinging} was called. */
  intervalMs: number;
  /** How long to wait for any hub frame after an expected answer. */
  timeoutMs: number;
}

/** A running keep-alive; nothing happens until one of its methods is called. */
export interface KeepAlive {
  /** Starts pinging; later calls do nothing. */
  startPinging(): void;
  /** Arms the dead-connection timer unless it runs already. */
  expectAnswer(): void;
  /** A hub frame arrived: disarms the dead-connection timer. */
  seen(): void;
  /** Clears every timer. */
  stop(): void;
}

/** Makes a keep-alive (idle until told to ping or to expect an answer). */
export function startKeepAlive(options: KeepAliveOptions): KeepAlive {
  let pingTimer: ReturnType<typeof setInterval> | undefined;
  let deadTimer: ReturnType<typeof setTimeout> | undefined;
  const keepAlive: KeepAlive = {
    startPinging() {
      pingTimer ??= setInterval(() => {
        if (options.sendPing()) keepAlive.expectAnswer();
      }, options.intervalMs);
    },
    expectAnswer() {
      // The fired timer stays set, so onDead runs at most once until seen().
      deadTimer ??= setTimeout(options.onDead, options.timeoutMs);
    },
    seen() {
      clearTimeout(deadTimer);
      deadTimer = undefined;
    },
    stop() {
      clearInterval(pingTimer);
      clearTimeout(deadTimer);
      pingTimer = deadTimer = undefined;
    },
  };
  return keepAlive;
}
