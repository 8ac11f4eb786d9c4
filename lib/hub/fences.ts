/**
 * The hub's fence set and its `.pending` marker files: one marker per daemon
 * ID with a job in flight, named by {@linkcode markerFileName} and holding the
 * raw ID; markers left behind by a crash or an unconfirmed cleanup fence the ID
 * again when a hub starts on the same state directory.
 *
 * @module
 */

import { join } from "node:path";
import { markerFileName } from "../relay.ts";

/** Fenced daemon IDs, with their markers persisted under an optional state directory. */
export class FenceStore {
  readonly #stateDir?: string;
  readonly #fenced = new Set<string>();
  readonly #markers = new Map<string, Promise<void>>();

  /** Loads the markers already in `stateDir` as fences. */
  constructor(stateDir?: string) {
    this.#stateDir = stateDir;
    if (stateDir === undefined) return;
    let entries: Deno.DirEntry[];
    try {
      entries = [...Deno.readDirSync(stateDir)];
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return;
      throw error;
    }
    for (const entry of entries) {
      if (!entry.isFile || !entry.name.endsWith(".pending")) continue;
      this.#fenced.add(Deno.readTextFileSync(join(stateDir, entry.name)));
    }
  }

  /** Whether `daemonId` is fenced. */
  has(daemonId: string): boolean {
    return this.#fenced.has(daemonId);
  }

  /** How many IDs are fenced. */
  get size(): number {
    return this.#fenced.size;
  }

  /** The fenced IDs, sorted. */
  list(): string[] {
    return [...this.#fenced].sort();
  }

  /** Fences `daemonId` (its marker, if any, stays on disk). */
  add(daemonId: string): void {
    this.#fenced.add(daemonId);
  }

  /** Whether a marker file for `daemonId` exists (possibly from another hub). */
  markerExists(daemonId: string): boolean {
    if (this.#stateDir === undefined) return false;
    try {
      Deno.statSync(join(this.#stateDir, markerFileName(daemonId)));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Writes and fsyncs the marker for `daemonId` unless this hub already holds
   * one; concurrent callers share the same write.
   */
  ensureMarker(daemonId: string): Promise<void> {
    if (this.#stateDir === undefined) return Promise.resolve();
    let pending = this.#markers.get(daemonId);
    if (pending === undefined) {
      pending = writeMarker(this.#stateDir, daemonId);
      this.#markers.set(daemonId, pending);
      pending.catch(() => this.#markers.delete(daemonId));
    }
    return pending;
  }

  /** Removes the marker for `daemonId` (after acknowledged quiescence). */
  async removeMarker(daemonId: string): Promise<void> {
    const pending = this.#markers.get(daemonId);
    this.#markers.delete(daemonId);
    if (this.#stateDir === undefined) return;
    await pending?.catch(() => {});
    try {
      await Deno.remove(join(this.#stateDir, markerFileName(daemonId)));
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }

  /** Lifts the fence on `daemonId` and deletes its marker; returns whether it was fenced. */
  async unfence(daemonId: string): Promise<boolean> {
    const wasFenced = this.#fenced.delete(daemonId) ||
      this.markerExists(daemonId);
    await this.removeMarker(daemonId);
    return wasFenced;
  }
}

async function writeMarker(stateDir: string, daemonId: string): Promise<void> {
  await Deno.mkdir(stateDir, { recursive: true, mode: 0o700 });
  const file = await Deno.open(join(stateDir, markerFileName(daemonId)), {
    write: true,
    create: true,
    truncate: true,
    mode: 0o600,
  });
  try {
    const bytes = new TextEncoder().encode(daemonId);
    let written = 0;
    while (written < bytes.length) {
      written += await file.write(bytes.subarray(written));
    }
    await file.sync();
  } finally {
    file.close();
  }
}
