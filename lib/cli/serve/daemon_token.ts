/**
 * The daemon hub's token `runner serve --daemon-enabled` makes for itself
 * when the operator gave none: kept in the data dir (`daemon-token`, mode
 * 0600), made on first start and reused on later ones, so a process on this
 * machine that is not a daemon (another user, an agent of another run)
 * cannot connect under a daemon's ID and take its jobs just by reaching
 * loopback. `runner daemon` on the same machine reads it when it is given no
 * token and its hub is on loopback. See `docs/daemon.md`, "Tokens".
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

/** The name of the daemon token file in the data dir. */
export const DAEMON_TOKEN_FILE_NAME = "daemon-token";

/** Where `runner serve` keeps the daemon token it made. */
export function daemonTokenPath(dataDir: string): string {
  return join(dataDir, DAEMON_TOKEN_FILE_NAME);
}

function keptDaemonToken(dataDir: string): KeptToken {
  return {
    path: daemonTokenPath(dataDir),
    what: "the daemon token runner serve keeps",
    flag: "--daemon-token",
  };
}

/**
 * The config with its daemon token: unchanged when the hub is off, a token
 * or per-daemon tokens are given, or `--daemon-loopback-without-token` is
 * set; else with the token kept in the data dir, made now if there is none.
 *
 * @throws {RunnerError} `config.invalid` when the kept token cannot be read
 * or written, other users may read it, or it is not a sound token; and for a
 * fleet replica (`--store`) without a token: daemons may reach any replica.
 */
export async function withDaemonToken(
  config: ServeConfig,
): Promise<ServeConfig> {
  const daemon = config.daemon;
  if (
    !daemon.enabled || daemon.token || Object.keys(daemon.tokens).length ||
    daemon.loopbackWithoutToken
  ) {
    return config;
  }
  if (config.fleet) {
    throw new RunnerError(
      "config.invalid",
      "--store makes this runner a fleet replica, and a daemon may connect to any replica's hub. " +
        "Pass the same --daemon-token (or RUNNER_DAEMON_TOKEN, or --daemon-tokens-file) to each replica, e.g. one made with runner token.",
    );
  }
  const token = await readOrMakeKeptToken(
    keptDaemonToken(config.dataDir),
    config.dataDir,
  );
  return {
    ...config,
    daemon: { ...daemon, token, tokenSource: "data-dir" },
  };
}

/**
 * The daemon token `runner serve` keeps in `dataDir`, or undefined when it
 * has made none there (yet).
 *
 * @throws {RunnerError} `config.invalid` when other users may read the file,
 * it cannot be read, or it holds no sound token.
 */
export function readKeptDaemonToken(
  dataDir: string,
): Promise<string | undefined> {
  return readKeptToken(keptDaemonToken(dataDir));
}
