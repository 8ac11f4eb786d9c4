/**
 * A fresh random token, what `runner token` prints and `runner serve` keeps
 * as its API token when none is given.
 *
 * @module
 */

/** Makes a random URL-safe token of 43 characters (32 random bytes). */
export function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-")
    .replaceAll("/", "_").replace(/=+$/, "");
}
