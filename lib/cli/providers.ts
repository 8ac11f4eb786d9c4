/**
 * `runner providers` and `runner token` (a fresh token, or the one
 * `runner serve` keeps).
 *
 * @module
 */

import { parseFlags, reportFailure, reportUsageError } from "./args.ts";
import { apiTokenPath, readApiTokenFile } from "./serve/api_token.ts";
import { daemonTokenPath, readKeptDaemonToken } from "./serve/daemon_token.ts";
import { randomToken } from "./random_token.ts";

export { randomToken };
import { defaultDataDir } from "../store/data_dir.ts";
import { RunnerError } from "../errors.ts";
import {
  CUSTOM_PROVIDER,
  listProviders,
  UNSUPPORTED_PROVIDERS,
} from "../providers.ts";
import {
  PIN_PLATFORMS,
  pinNeeds,
  PRESET_PINS,
  type PresetPin,
} from "../agent/preset_pins.ts";

const PROVIDERS_HELP =
  `Usage: runner providers [--json] [--registry [--refresh] [--registry-url URL] [--data-dir DIR]]

Lists the built-in provider presets, the command each runs on this machine (its
own executable when on PATH, else its pinned npx fallback), each pin's platforms
and what else it needs, and known agents that are not presets.

With --registry: the ACP registry's agents (provider=<id>), each with its
version, what this machine runs of it (a binary for this platform, npx or uvx),
the versions installed here and every distribution it has. The registry is
cached in the data dir for an hour (--refresh fetches it now); offline, the
cached copy is listed with its age.`;

const TOKEN_HELP = `Usage: runner token [--show [--daemon] [--data-dir DIR]]

Prints a fresh random token (for --daemon-token or --api-token).

  --show            print instead the API token runner serve made and keeps in
                    DIR/api-token (what a client sends as Authorization: Bearer)
  --daemon          (implies --show) the daemon hub's token runner serve
                    --daemon-enabled made and keeps in DIR/daemon-token (what a
                    daemon sends in its hello; runner daemon on this machine
                    reads it itself, daemon.py needs it configured)
  --data-dir DIR    the serve's data dir (default: $RUNNER_DATA_DIR, else the
                    user data dir)`;

/** Lists the provider presets and the agents that are not presets, or (`--registry`) the registry's agents. */
export function providersCommand(args: string[]): Promise<number> {
  let values;
  try {
    values = parseFlags({
      args,
      options: {
        json: { type: "boolean" },
        registry: { type: "boolean" },
        refresh: { type: "boolean" },
        "registry-url": { type: "string" },
        "data-dir": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    return Promise.resolve(reportUsageError(error, "providers"));
  }
  if (values.help) console.log(PROVIDERS_HELP);
  else if (values.registry) return registryProviders(values);
  else if (values.json) console.log(JSON.stringify(listProviders(), null, 2));
  else console.log(formatProvidersTable());
  return Promise.resolve(0);
}

/** `runner providers --registry`. */
async function registryProviders(values: {
  json?: boolean;
  refresh?: boolean;
  "registry-url"?: string;
  "data-dir"?: string;
}): Promise<number> {
  try {
    const { registryProvidersText, registryUrlOf } = await import(
      "./agents.ts"
    );
    const text = await registryProvidersText({
      url: registryUrlOf(values["registry-url"]),
      dataDir: values["data-dir"] ?? defaultDataDir(),
      refresh: values.refresh,
      json: values.json,
    });
    await Deno.stdout.write(new TextEncoder().encode(text));
    return 0;
  } catch (error) {
    return reportFailure(error);
  }
}

/** Prints a fresh random token, or with `--show` the one `runner serve` keeps. */
export async function tokenCommand(args: string[]): Promise<number> {
  let values;
  try {
    values = parseFlags({
      args,
      options: {
        show: { type: "boolean" },
        daemon: { type: "boolean" },
        "data-dir": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    return reportUsageError(error, "token");
  }
  if (values.help) {
    console.log(TOKEN_HELP);
    return 0;
  }
  if (!values.show && !values.daemon) {
    console.log(randomToken());
    return 0;
  }
  try {
    const dataDir = values["data-dir"] ?? defaultDataDir();
    const token = values.daemon
      ? await readKeptDaemonToken(dataDir)
      : await readApiTokenFile(apiTokenPath(dataDir));
    if (token === undefined) {
      throw new RunnerError(
        "config.invalid",
        values.daemon
          ? `No daemon token is kept in ${
            daemonTokenPath(dataDir)
          }: runner serve --daemon-enabled makes it on its first start without --daemon-token. Start it once, or name its --data-dir.`
          : `No API token is kept in ${
            apiTokenPath(dataDir)
          }: runner serve makes it on its first start without --api-token. Start it once, or name its --data-dir.`,
      );
    }
    console.log(token);
    return 0;
  } catch (error) {
    return reportFailure(error);
  }
}

/** The human-readable text `runner providers` prints for a `PATH`. */
export function formatProvidersTable(path = Deno.env.get("PATH")): string {
  const presetRows = listProviders(path).presets.map((preset) => [
    preset.name,
    preset.uses === "executable"
      ? "own executable"
      : `fallback (${PRESET_PINS[preset.name].bin} not on PATH${
        preset.pin.version ? "" : "; unpinned"
      })`,
    preset.command,
    preset.recovery.join(", "),
  ]);
  const lines = [
    "Built-in providers (provider=<name>), with the command each runs on this machine:",
    ...alignColumns([
      ["NAME", "USES", "ACP COMMAND", "SESSION RECOVERY"],
      ...presetRows,
    ]),
    "",
    "A preset runs the agent's own executable when it is on the agent's PATH, else its pinned npx fallback; acp-command overrides both.",
    "Any agent of the ACP registry: provider=<its id>, installed on first use (runner providers --registry lists them, docs/registry.md).",
    `Any other ACP agent: provider=${CUSTOM_PROVIDER} with acp-command="<command>".`,
    "",
    "Pinned fallbacks: where npm installs them, and what they need that npx does not bring:",
    ...alignColumns([
      ["NAME", "PIN", "INSTALLS ON", "NEEDS"],
      ...Object.entries(PRESET_PINS).map(([name, pin]) => [
        name,
        ...pinCells(pin),
      ]),
    ]),
    "",
    "Not built in (usable with provider=custom, without verified session recovery):",
    ...UNSUPPORTED_PROVIDERS.map((entry) => `  ${entry.name}: ${entry.reason}`),
  ];
  return lines.join("\n") + "\n";
}

/** A pin's PIN, INSTALLS ON and NEEDS cells. */
function pinCells(pin: PresetPin): string[] {
  if (pin.version === null) {
    return [
      `unpinned: no ${pin.package} on the registry (${pin.checked})`,
      "-",
      "-",
    ];
  }
  const missing = PIN_PLATFORMS.filter((platform) => pin.notOn?.[platform]);
  const installs = !pin.native
    ? "any platform with Node (JavaScript)"
    : pin.platforms.join(", ") +
      (missing.length ? ` (no npm package for ${missing.join(", ")})` : "");
  return [
    `${pin.package}@${pin.version}`,
    installs,
    pinNeeds(pin).join("; ") || "-",
  ];
}

function alignColumns(rows: string[][]): string[] {
  const widths = rows[0].map((_, column) =>
    Math.max(...rows.map((row) => row[column].length))
  );
  return rows.map((row) =>
    "  " +
    row.map((cell, column) =>
      column === row.length - 1 ? cell : cell.padEnd(widths[column])
    ).join("  ")
  );
}
