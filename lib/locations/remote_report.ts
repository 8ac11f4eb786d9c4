/**
 * What a remote wrapper reports on ssh's stderr before the agent starts: its
 * process group (bash) or process id (PowerShell), printed before it reads
 * env-json from stdin, and (PowerShell only) that it has read env-json.
 * The runner writes env-json only after the first report, so a wrapper whose
 * ssh connection failed early (a refused `-R` tunnel) sees end-of-input and
 * exits without starting the agent.
 *
 * @module
 */

import type { AgentProcess } from "../agent/process.ts";

/** The marker line, followed by the process group or id, a wrapper prints first. */
export const REMOTE_PGID_MARKER = "__RUNNER_REMOTE_PGID__";

/** The marker line a PowerShell wrapper prints once it has read env-json. */
export const REMOTE_READY_MARKER = "__RUNNER_REMOTE_READY__";

/** The remote wrapper's reports, read from ssh's stderr. */
export interface RemoteReport {
  /** Takes ssh's stderr (for `spawnAgent`'s `onStderr`). */
  onStderr(text: string): void;
  /** The remote process group (or process id), once reported. */
  pgid(): number | undefined;
  /** Resolves when the remote process group was reported. */
  known: Promise<void>;
  /** Resolves when the wrapper reported that it read env-json. */
  ready: Promise<void>;
}

/** Watches ssh's stderr for the wrapper's reports. */
export function watchRemoteReport(): RemoteReport {
  let seen = "";
  let remotePgid: number | undefined;
  let isReady = false;
  const pgidKnown = Promise.withResolvers<void>();
  const readySeen = Promise.withResolvers<void>();
  const pgidMarker = new RegExp(`${REMOTE_PGID_MARKER} (\\d+)`);
  return {
    onStderr(text) {
      if (remotePgid !== undefined && isReady) return;
      seen = (seen + text).slice(-4096);
      const match = remotePgid === undefined && seen.match(pgidMarker);
      if (match) {
        remotePgid = Number(match[1]);
        pgidKnown.resolve();
      }
      if (!isReady && seen.includes(REMOTE_READY_MARKER)) {
        isReady = true;
        readySeen.resolve();
      }
    },
    pgid: () => remotePgid,
    known: pgidKnown.promise,
    ready: readySeen.promise,
  };
}

/**
 * An agent's stderr tail without the wrapper's report lines: they are the
 * runner's own plumbing, not the agent's words (`run.failed`'s
 * `stderr_tail`).
 */
export function withoutReports(tail: string): string {
  return tail.split("\n").filter((line) =>
    !line.startsWith(`${REMOTE_PGID_MARKER} `) &&
    !line.startsWith(REMOTE_READY_MARKER)
  ).join("\n");
}

/** How waiting for a report ended. */
export type ReportOutcome = "reported" | "exited" | "aborted";

/** Waits for `report`, the ssh process's exit, or `signal`, whichever comes first. */
export async function awaitReport(
  report: Promise<void>,
  agent: AgentProcess,
  signal?: AbortSignal,
): Promise<ReportOutcome> {
  const aborted = Promise.withResolvers<"aborted">();
  const onAbort = () => aborted.resolve("aborted");
  if (signal?.aborted) onAbort();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return await Promise.race([
      report.then(() => "reported" as const),
      agent.exited.then(() => "exited" as const),
      aborted.promise,
    ]);
  } finally {
    signal?.removeEventListener("abort", onAbort);
  }
}
