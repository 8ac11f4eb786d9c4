/**
 * `runner run`'s signals: SIGINT, SIGTERM and SIGHUP are caught from the
 * moment the command has checked its arguments (its agent may already be
 * starting ahead of the run), so a signal never kills the runner and leaves
 * the agent behind. Before the run exists a signal only ends the command
 * (its agent is discarded); once it exists it cancels the run. See
 * `docs/teardown.md`.
 *
 * @module
 */

/** Exit codes of a command ended by a signal (128 + the signal number). */
const SIGNAL_EXIT_CODES: ReadonlyArray<[Deno.Signal, number]> = [
  ["SIGINT", 130],
  ["SIGTERM", 143],
  ["SIGHUP", 129],
];

/** The signals one `runner run` has received, and what they cancel. */
export interface RunSignals {
  /** The exit code of the first signal received, if any. */
  readonly received: number | undefined;
  /** Cancels `cancel` on a signal (at once if one came already). */
  onSignal(cancel: () => void): void;
  /** Stops listening (the default actions apply again). */
  stop(): void;
}

/** Starts listening for the signals that end `runner run`. */
export function listenForRunSignals(): RunSignals {
  let received: number | undefined;
  let cancel: (() => void) | undefined;
  const listeners: Array<[Deno.Signal, () => void]> = [];
  for (const [signal, exitCode] of SIGNAL_EXIT_CODES) {
    const listener = () => {
      received ??= exitCode;
      cancel?.();
    };
    try {
      Deno.addSignalListener(signal, listener);
      listeners.push([signal, listener]);
    } catch { /* a signal this platform does not have */ }
  }
  return {
    get received() {
      return received;
    },
    onSignal(next) {
      cancel = next;
      if (received !== undefined) next();
    },
    stop() {
      for (const [signal, listener] of listeners) {
        Deno.removeSignalListener(signal, listener);
      }
    },
  };
}
