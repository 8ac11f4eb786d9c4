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
import { tokenProblem } from "../../hub/token_rules.ts";
import type { ServeConfig } from "../../server/config/serve_config.ts";
import { randomToken } from "../random_token.ts";

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

/** The kept token, made (and written with mode 0600) when there is none. */
export async function readOrMakeApiToken(dataDir: string): Promise<string> {
  const path = apiTokenPath(dataDir);
  const kept = await readApiTokenFile(path);
  if (kept !== undefined) return kept;
  try {
    await Deno.mkdir(dataDir, { recursive: true, mode: 0o700 });
    const token = randomToken();
    // createNew: of two first starts at once, one writes and the other reads.
    const file = await Deno.open(path, {
      write: true,
      createNew: true,
      mode: 0o600,
    });
    try {
      await file.write(new TextEncoder().encode(`${token}\n`));
    } finally {
      file.close();
    }
    return token;
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) {
      const raced = await readApiTokenFile(path);
      if (raced !== undefined) return raced;
    }
    throw tokenFileFailure(path, error);
  }
}

/**
 * The token kept at `path`, or undefined when there is no file.
 *
 * @throws {RunnerError} `config.invalid` when other users may read the file,
 * it cannot be read, or it holds no sound token.
 */
export async function readApiTokenFile(
  path: string,
): Promise<string | undefined> {
  let text: string;
  try {
    const info = await Deno.stat(path);
    if (info.mode !== null && (info.mode & 0o077) !== 0) {
      throw new RunnerError(
        "config.invalid",
        `${path} (the API token runner serve keeps) may be read by other users (mode ${
          (info.mode & 0o777).toString(8)
        }). Run chmod 600 ${path}, or delete it to have a new token made.`,
      );
    }
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    if (error instanceof RunnerError) throw error;
    throw tokenFileFailure(path, error);
  }
  const token = text.replace(/\r?\n$/, "");
  const problem = tokenProblem(token);
  if (problem) {
    throw new RunnerError(
      "config.invalid",
      `${path} (the API token runner serve keeps) is refused: ${problem}. Delete it to have a new token made, or pass --api-token.`,
    );
  }
  return token;
}

function tokenFileFailure(path: string, error: unknown): RunnerError {
  return new RunnerError(
    "config.invalid",
    `Cannot keep the API token in ${path} (${
      error instanceof Error ? error.message : error
    }). Make the data dir writable (--data-dir), or pass --api-token.`,
  );
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
