/**
 * `runner providers` and `runner token`.
 *
 * @module
 */

import { parseFlags, reportUsageError } from "./args.ts";
import { formatProvidersTable, listProviders } from "../providers.ts";

const PROVIDERS_HELP =
  "Usage: runner providers [--json]\n\nLists the built-in provider presets and known agents that are not presets.";

const TOKEN_HELP =
  "Usage: runner token\n\nPrints a fresh random token (for --daemon-token or --api-token).";

/** Lists the provider presets and the agents that are not presets. */
export function providersCommand(args: string[]): Promise<number> {
  let values;
  try {
    values = parseFlags({
      args,
      options: {
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    return Promise.resolve(reportUsageError(error, "providers"));
  }
  if (values.help) console.log(PROVIDERS_HELP);
  else if (values.json) console.log(JSON.stringify(listProviders(), null, 2));
  else console.log(formatProvidersTable());
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
  let values;
  try {
    values = parseFlags({
      args,
      options: { help: { type: "boolean", short: "h" } },
    }).values;
  } catch (error) {
    return Promise.resolve(reportUsageError(error, "token"));
  }
  console.log(values.help ? TOKEN_HELP : randomToken());
  return Promise.resolve(0);
}
