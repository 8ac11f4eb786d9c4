/**
 * The API token `runner serve` makes for itself when the operator gave none:
 * kept in the data dir (`api-token`, mode 0600), made on first start and
 * reused on later ones, so a process on this machine that is not the
 * operator (another user, an agent, a web-fetch tool a prompt injection
 * steers) cannot use the API just by reaching loopback. See
 * `docs/http-api.md`, "Authentication".
 *
 * @module
 */

import { join } from "node:path";
import { RunnerError } from "../../errors.ts";
import type { ServeConfig } from "../../server/config/serve_config.ts";
import {
  type KeptToken,
  readKeptToken,
  readOrMakeKeptToken,
} from "./kept_token.ts";

/** The name of the token file in the data dir. */
export const API_TOKEN_FILE_NAME = "api-token";

/** Where `runner serve` keeps the API token it made. */
export function apiTokenPath(dataDir: string): string {
  return join(dataDir, API_TOKEN_FILE_NAME);
}

/**
 * The config with its API token: the given one, else (unless
 * `--loopback-without-token`) the one kept in the data dir, made now if
 * there is none yet.
 *
 * @throws {RunnerError} `config.invalid` when the kept token cannot be read
 * or written, other users may read it, or it is not a sound token; and for
 * a fleet replica (`--store`) without a token: replicas must share one.
 */
export async function withApiToken(config: ServeConfig): Promise<ServeConfig> {
  if (config.apiToken || config.loopbackWithoutToken) return config;
  if (config.fleet) {
    throw new RunnerError(
      "config.invalid",
      "--store makes this runner a fleet replica, and every replica must accept the same API token. " +
        "Pass the same --api-token (or RUNNER_API_TOKEN) to each replica, e.g. one made with runner token.",
    );
  }
  const token = await readOrMakeApiToken(config.dataDir);
  return { ...config, apiToken: token, apiTokenSource: "data-dir" };
}

/** Which kept token the API token is, for messages. */
function keptApiToken(path: string): KeptToken {
  return {
    path,
    what: "the API token runner serve keeps",
    flag: "--api-token",
  };
}

/** The kept token, made (and written with mode 0600) when there is none. */
export function readOrMakeApiToken(dataDir: string): Promise<string> {
  return readOrMakeKeptToken(keptApiToken(apiTokenPath(dataDir)), dataDir);
}

/**
 * The token kept at `path`, or undefined when there is no file.
 *
 * @throws {RunnerError} `config.invalid` when other users may read the file,
 * it cannot be read, or it holds no sound token.
 */
export function readApiTokenFile(path: string): Promise<string | undefined> {
  return readKeptToken(keptApiToken(path));
}

/**
 * The line `runner serve` prints once it listens: the console's URL, with
 * the token in the fragment (browsers never send a fragment, so no access
 * log sees it) when the token is the one it keeps, and nothing of a token
 * the operator gave.
 */
export function consoleLine(config: ServeConfig, url: string): string {
  if (config.apiToken && config.apiTokenSource === "data-dir") {
    return `console: ${url}/#token=${
      encodeURIComponent(config.apiToken)
    }  (API token kept in ${
      apiTokenPath(config.dataDir)
    }; runner token --show prints it)`;
  }
  if (config.apiToken) {
    return `console: ${url}/  (sign in with the --api-token)`;
  }
  return `console: ${url}/  (WARNING: --loopback-without-token: any process on this machine may use the API)`;
}
