/**
 * `runner providers` and `runner token`.
 *
 * @module
 */

import { formatProvidersTable, listProviders } from "./providers.ts";

/** Lists the provider presets and the agents that are not presets. */
export function providersCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(
      "Usage: runner providers [--json]\n\nLists the built-in provider presets and known agents that are not presets.",
    );
  } else if (args.includes("--json")) {
    console.log(JSON.stringify(listProviders(), null, 2));
  } else {
    console.log(formatProvidersTable());
  }
  return Promise.resolve(0);
}

/** Makes a random URL-safe token of 43 characters (32 random bytes). */
export function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-")
    .replaceAll("/", "_").replace(/=+$/, "");
}

/** Prints a fresh random token. */
export function tokenCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(
      "Usage: runner token\n\nPrints a fresh random token (for --daemon-token or --api-token).",
    );
  } else {
    console.log(randomToken());
  }
  return Promise.resolve(0);
}
