/**
 * Upkeep of the SQLite store file when `runner serve` opens it: a check of
 * every page (`PRAGMA quick_check`), so a damaged file is reported at once
 * rather than at the first write that touches the damage, and the one-off
 * conversion of a file written without incremental vacuum, so the space of
 * pruned runs goes back to the file system.
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";

/** Problems `PRAGMA quick_check` reports at most. */
const QUICK_CHECK_PROBLEMS = 3;

/** The message of a damaged store file, with what to do. */
export function damagedFileMessage(path: string, detail: string): string {
  return `The store file ${path} is damaged (${detail}); stop the runner, move the file and its -wal and -shm files aside, and start again with an empty store or a backup.`;
}

/** Whether a driver failure says the file is damaged (not merely busy or full). */
export function isDamage(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /malformed|not a database|corrupt/i.test(message);
}

/** What `PRAGMA quick_check` found wrong, or undefined when every page is sound. */
export function quickCheck(db: DatabaseSync): string | undefined {
  let rows: Record<string, unknown>[];
  try {
    rows = db.prepare(`PRAGMA quick_check(${QUICK_CHECK_PROBLEMS})`).all();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  const problems = rows.map((row) => String(Object.values(row)[0]));
  return problems.length === 1 && problems[0] === "ok"
    ? undefined
    : problems.join("; ");
}

/**
 * Turns on incremental vacuum for a file that was written without it (a
 * `VACUUM` rewrites the whole file once, needing as much free disk space);
 * returns whether it converted the file.
 */
export function enableIncrementalVacuum(db: DatabaseSync): boolean {
  const row = db.prepare("PRAGMA auto_vacuum").get() as { auto_vacuum: number };
  if (Number(row.auto_vacuum) === 2) return false;
  db.exec("PRAGMA auto_vacuum = INCREMENTAL");
  db.exec("VACUUM");
  return true;
}
