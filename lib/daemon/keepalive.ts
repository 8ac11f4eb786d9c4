/**
 * The daemon's keep-alive: pings the hub at an interval and declares the
 * connection dead when no hub frame follows an expected answer (a ping, the
 * hello, our close) within a timeout. While something holds it (an MCP
 * request the hub is still working on), the dead-connection clock stands
 * still: the Python hub answers `mcp.request` inside its reader loop and so
 * answers no ping until the tool call is done. Knows nothing of sockets or
 * logs.
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
  /** Arms the dead-connection timer unless it runs already (or is held). */
  expectAnswer(): void;
  /** A hub frame arrived: disarms the dead-connection timer. */
  seen(): void;
  /**
   * Stops the dead-connection clock until the returned release is called
   * (once per hold). When the last hold is released and an answer is still
   * due, the clock starts again with the whole timeout.
   */
  hold(): () => void;
  /** Clears every timer; later calls change nothing. */
  stop(): void;
}

/** Makes a keep-alive (idle until told to ping or to expect an answer). */
export function startKeepAlive(options: KeepAliveOptions): KeepAlive {
  let pingTimer: ReturnType<typeof setInterval> | undefined;
  let deadTimer: ReturnType<typeof setTimeout> | undefined;
  let awaiting = false;
  let holds = 0;
  let stopped = false;
  let fired = false;
  const arm = () => {
    // onDead runs at most once until seen().
    if (stopped || fired || holds > 0) return;
    deadTimer ??= setTimeout(() => {
      fired = true;
      deadTimer = undefined;
      options.onDead();
    }, options.timeoutMs);
  };
  const disarm = () => {
    clearTimeout(deadTimer);
    deadTimer = undefined;
  };
  const keepAlive: KeepAlive = {
    startPinging() {
      if (stopped) return;
      pingTimer ??= setInterval(() => {
        if (options.sendPing()) keepAlive.expectAnswer();
      }, options.intervalMs);
    },
    expectAnswer() {
      awaiting = true;
      arm();
    },
    seen() {
      awaiting = false;
      fired = false;
      disarm();
    },
    hold() {
      holds += 1;
      disarm();
      let released = false;
      return () => {
        if (released) return;
        released = true;
        holds -= 1;
        if (awaiting) arm();
      };
    },
    stop() {
      stopped = true;
      clearInterval(pingTimer);
      disarm();
      pingTimer = undefined;
    },
  };
  return keepAlive;
}
