/**
 * What the archive readers hand the extractor: entries checked for their
 * names and kinds, and the limits every reader keeps.
 *
 * @module
 */

import { RunnerError } from "../../errors.ts";

/** One archive member as read. */
export interface ArchiveEntry {
  /** Its path inside the archive, normalised (`bin/agent`), never absolute, never with `..`. */
  path: string;
  /** What it is; device files, FIFOs and the like are refused by the readers. */
  kind: "file" | "directory" | "symlink" | "hardlink";
  /** The permission bits (`0o755`), when the archive has them. */
  mode?: number;
  /** A file's bytes. */
  data?: Uint8Array;
  /** A link's target as written in the archive. */
  target?: string;
}

/** The limits of reading one archive. */
export interface ArchiveLimits {
  /** The most bytes all files may hold together, uncompressed. */
  maxBytes: number;
  /** The most entries. */
  maxEntries: number;
}

/** The default limits: 1 GiB unpacked, 100 000 entries. */
export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = {
  maxBytes: 1024 * 1024 * 1024,
  maxEntries: 100_000,
};

/** The `agent.archive_refused` error for `reason`. */
export function archiveRefused(reason: string): RunnerError {
  return new RunnerError(
    "agent.archive_refused",
    `The agent's archive was refused: ${reason}. Nothing was installed; check the registry entry (or ask its maintainers), or install the agent yourself and set acp-command.`,
    { detail: { reason } },
  );
}

/**
 * An archive member's name as a safe relative path (`./bin/x` → `bin/x`);
 * refuses absolute paths, drive letters, `..`, backslashes and NUL.
 */
export function safeEntryPath(name: string): string {
  if (name.includes("\0")) throw archiveRefused(`an entry name holds NUL`);
  if (name.includes("\\")) {
    throw archiveRefused(`entry ${JSON.stringify(name)} holds a backslash`);
  }
  if (name.startsWith("/") || /^[A-Za-z]:/.test(name)) {
    throw archiveRefused(`entry ${JSON.stringify(name)} has an absolute path`);
  }
  const parts = name.split("/").filter((part) => part !== "" && part !== ".");
  if (parts.includes("..")) {
    throw archiveRefused(
      `entry ${JSON.stringify(name)} leads outside its directory (..)`,
    );
  }
  return parts.join("/");
}

/** Counts entries and bytes against the limits as a reader goes. */
export class ArchiveBudget {
  #entries = 0;
  #bytes = 0;
  /** Starts with nothing spent of `limits`. */
  constructor(readonly limits: ArchiveLimits) {}

  /** Spends one entry of `bytes`; refuses past a limit. */
  spend(bytes: number): void {
    this.#entries += 1;
    this.#bytes += bytes;
    if (this.#entries > this.limits.maxEntries) {
      throw archiveRefused(
        `more than ${this.limits.maxEntries} entries`,
      );
    }
    if (this.#bytes > this.limits.maxBytes) {
      throw archiveRefused(
        `it unpacks to more than the size limit of ${this.limits.maxBytes} bytes`,
      );
    }
  }
}
