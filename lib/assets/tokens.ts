/**
 * Run tokens: short-lived bearer secrets that map an assets MCP request to
 * its run's backend. Only a SHA-256 digest of each token is kept, so lookups
 * compare digests, never the secret itself.
 *
 * @module
 */

import { createHash, randomBytes } from "node:crypto";

/** Options for {@linkcode createTokenRegistry}. */
export interface TokenRegistryOptions {
  /** How long a token stays valid after it is issued (Infinity: until revoked). */
  ttlMs: number;
  /** The clock, in milliseconds since the epoch (tests inject one). */
  now?: () => number;
}

/** Issues, resolves and revokes run tokens. */
export interface TokenRegistry<T> {
  /** Issues a fresh random token (32 bytes, base64url) for `runId`'s `backend`. */
  issue(runId: string, backend: T): string;
  /** The backend of a live token, or undefined (unknown, expired or revoked). */
  resolve(token: string | undefined): T | undefined;
  /** The run id of a live token, or undefined. */
  runIdOf(token: string | undefined): string | undefined;
  /** Revokes every token of `runId`. */
  revoke(runId: string): void;
  /** Revokes one token. */
  revokeToken(token: string): void;
  /** Revokes everything. */
  clear(): void;
}

interface Entry<T> {
  runId: string;
  backend: T;
  expiresAt: number;
}

function digest(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Creates an in-memory run token registry. */
export function createTokenRegistry<T>(
  options: TokenRegistryOptions,
): TokenRegistry<T> {
  const now = options.now ?? Date.now;
  const entries = new Map<string, Entry<T>>();

  function sweep(): void {
    const time = now();
    for (const [key, entry] of entries) {
      if (entry.expiresAt <= time) entries.delete(key);
    }
  }

  function live(token: string | undefined): Entry<T> | undefined {
    if (typeof token !== "string" || token === "") return undefined;
    const key = digest(token);
    const entry = entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= now()) {
      entries.delete(key);
      return undefined;
    }
    return entry;
  }

  return {
    issue(runId, backend) {
      sweep();
      const token = randomBytes(32).toString("base64url");
      entries.set(digest(token), {
        runId,
        backend,
        expiresAt: now() + options.ttlMs,
      });
      return token;
    },
    resolve: (token) => live(token)?.backend,
    runIdOf: (token) => live(token)?.runId,
    revoke(runId) {
      for (const [key, entry] of entries) {
        if (entry.runId === runId) entries.delete(key);
      }
    },
    revokeToken(token) {
      entries.delete(digest(token));
    },
    clear() {
      entries.clear();
    },
  };
}
