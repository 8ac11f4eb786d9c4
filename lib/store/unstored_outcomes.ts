/**
 * Outcomes of runs whose end could not be stored yet (a full disk, another
 * process holding the write lock): the store remembers them until the
 * retried write lands, so a run that has ended never reads as `active`
 * meanwhile — as queued events are read from memory while writes fail.
 *
 * @module
 */

import type { ListRunsOptions, RunOutcome, RunRecord } from "./types.ts";

/** Run outcomes not stored yet, by run id. */
export class UnstoredOutcomes {
  readonly #outcomes = new Map<string, RunOutcome & { at: number }>();

  /** Remembers the outcome whose write just failed. */
  remember(runId: string, outcome: RunOutcome): void {
    this.#outcomes.set(runId, { ...outcome, at: Date.now() });
  }

  /** Forgets the run's outcome (its write landed, or the run had ended already). */
  forget(runId: string): void {
    this.#outcomes.delete(runId);
  }

  /** Forgets every outcome (the lease they were to be written under is lost). */
  clear(): void {
    this.#outcomes.clear();
  }

  /** The record as it reads with its unstored outcome, if it has one. */
  apply(record: RunRecord): RunRecord {
    const outcome = this.#outcomes.get(record.runId);
    if (!outcome || record.status !== "active") return record;
    return {
      ...record,
      status: outcome.status,
      code: outcome.code,
      error: outcome.error,
      ...(outcome.usage ? { usage: outcome.usage } : {}),
      updatedAt: outcome.at,
      finishedAt: outcome.at,
    };
  }

  /** A listing's records with unstored outcomes applied, minus those the status filter no longer matches. */
  applyToListing(
    records: RunRecord[],
    options: ListRunsOptions,
  ): RunRecord[] {
    if (!this.#outcomes.size) return records;
    return records.map((record) => this.apply(record)).filter((record) =>
      options.status === undefined || record.status === options.status
    );
  }
}
