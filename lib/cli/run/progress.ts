/**
 * The one-line progress of `runner run` on a terminal: while the agent starts
 * (`starting agent…`, `initializing…`, `opening session…`, `waiting for the
 * agent…`), shown on stderr once it takes longer than a second, and erased
 * when the agent's first output arrives or the run ends.
 *
 * @module
 */

/** What the startup steps' debug log lines move the progress to. */
const NEXT_STEP: Record<string, string> = {
  "agent started": "initializing…",
  "agent initialized": "opening session…",
  "session ready": "waiting for the agent…",
};

/** A progress line that can follow a run's startup. */
export interface Progress {
  /** Feeds a run log entry (the startup steps move the line on). */
  log(entry: Record<string, unknown>): void;
  /** Erases the line for good (first output, or the end). */
  done(): void;
}

/** Options for {@linkcode createProgress}. */
export interface ProgressOptions {
  /** Whether to show anything (stdout and stderr are terminals). */
  enabled: boolean;
  /** How long the agent may take before the line shows (default 1000 ms). */
  delayMs?: number;
  /** Where the line goes (default: stderr). */
  write?: (text: string) => void;
}

/** Makes the progress line; nothing shows unless `enabled`. */
export function createProgress(options: ProgressOptions): Progress {
  if (!options.enabled) return { log() {}, done() {} };
  const encoder = new TextEncoder();
  const write = options.write ??
    ((text: string) => Deno.stderr.writeSync(encoder.encode(text)));
  let step = "starting agent…";
  let shown = false;
  let finished = false;
  const show = () => write(`\r\x1b[2K${step}`);
  const timer = setTimeout(() => {
    shown = true;
    show();
  }, options.delayMs ?? 1000);
  return {
    log(entry) {
      const next = NEXT_STEP[String(entry.msg)];
      if (!next || finished) return;
      step = next;
      if (shown) show();
    },
    done() {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      if (shown) write("\r\x1b[2K");
    },
  };
}
