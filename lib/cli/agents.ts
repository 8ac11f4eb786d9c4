/**
 * `runner agents list|install|remove`: the ACP registry's agents installed
 * on this machine (`docs/registry.md`), and `runner providers --registry`'s
 * listing of the registry itself.
 *
 * @module
 */

import {
  parseFlags,
  registryUrlFromEnv,
  reportFailure,
  reportUsageError,
} from "./args.ts";
import { defaultDataDir } from "../store/data_dir.ts";
import { RunnerError } from "../errors.ts";
import { DEFAULT_REGISTRY_URL, isRegistryUrl } from "../config_schema.ts";
import {
  catalogueAgeNote,
  loadCatalogue,
  type LoadedCatalogue,
} from "../agent/registry/source.ts";
import {
  currentRegistryPlatform,
  planLaunch,
} from "../agent/registry/launch_plan.ts";
import {
  isRegistryId,
  isRegistryVersion,
  type RegistryAgent,
} from "../agent/registry/catalogue.ts";
import {
  installAgent,
  listInstalled,
  removeAgent,
} from "../agent/registry/installs.ts";
import { installReporting } from "./install_progress.ts";

const AGENTS_HELP = `Usage: runner agents list|install|remove [options]

The ACP registry's agents installed on this machine, in
DATA_DIR/agents/<id>/<version>/ (docs/registry.md). A run installs a
registry agent's binary on first use; these commands do it ahead, list what is
installed and remove it.

  runner agents list [--json]
  runner agents install <id> [--sha256 HEX] [--refresh]
  runner agents remove <id> [--version VER]

Options:
  --registry-url URL  the registry (default: the official one; file:// and
                      http:// on loopback work)
  --refresh           fetch the registry whatever the cache's age
  --sha256 HEX        refuse the archive unless its sha256 is HEX
  --version VER       remove only this version
  --data-dir DIR      the data dir (default: $RUNNER_DATA_DIR, else the user
                      data dir)
  --json              print JSON`;

const REFRESH_SECONDS = 3600;

/** Runs `runner agents`; returns the exit code. */
export async function agentsCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags({
      args,
      allowPositionals: true,
      options: {
        "registry-url": { type: "string" },
        refresh: { type: "boolean" },
        sha256: { type: "string" },
        version: { type: "string" },
        "data-dir": { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    return reportUsageError(error, "agents");
  }
  const { values, positionals } = parsed;
  const [action, id] = positionals;
  if (values.help) {
    console.log(AGENTS_HELP);
    return 0;
  }
  try {
    const dataDir = values["data-dir"] ?? defaultDataDir();
    if (action === "list") return listCommand(dataDir, Boolean(values.json));
    if (id !== undefined && !isRegistryId(id)) {
      throw new RunnerError(
        "config.invalid",
        `${
          JSON.stringify(id)
        } is not a registry id (lower-case letters, digits, . _ -).`,
      );
    }
    if (values.version !== undefined && !isRegistryVersion(values.version)) {
      throw new RunnerError(
        "config.invalid",
        `--version: ${JSON.stringify(values.version)} is not a plain version.`,
      );
    }
    if ((action === "install" || action === "remove") && id) {
      return action === "install"
        ? await installCommand({
          dataDir,
          id,
          url: registryUrlOf(values["registry-url"]),
          refresh: values.refresh,
          sha256: values.sha256,
          json: values.json,
        })
        : await removeCommand(dataDir, id, values.version);
    }
    return reportUsageError(
      new RunnerError(
        "config.invalid",
        "Say what to do: runner agents list, install <id> or remove <id>.",
      ),
      "agents",
    );
  } catch (error) {
    return reportFailure(error);
  }
}

/** `--registry-url`, checked like the `registry-url` config key. */
export function registryUrlOf(value: string | undefined): string {
  if (value === undefined) {
    return registryUrlFromEnv() ?? DEFAULT_REGISTRY_URL;
  }
  if (!isRegistryUrl(value)) {
    throw new RunnerError(
      "config.invalid",
      `--registry-url: must be an https:// URL, a file:// URL or http:// on a loopback address (got "${value}")`,
    );
  }
  return value;
}

function listCommand(dataDir: string, json: boolean): number {
  const installed = listInstalled(dataDir);
  if (json) {
    console.log(JSON.stringify(
      installed.map(({ receipt, dir, program }) => ({
        ...receipt,
        dir,
        program,
      })),
      null,
      2,
    ));
    return 0;
  }
  if (!installed.length) {
    console.log("No registry agents are installed.");
    return 0;
  }
  for (const { receipt, dir } of installed) {
    console.log(
      `${receipt.id} ${receipt.version}  ${receipt.platform}  sha256 ${receipt.sha256}  ${dir}`,
    );
  }
  return 0;
}

async function installCommand(options: {
  dataDir: string;
  id: string;
  url: string;
  refresh?: boolean;
  sha256?: string;
  json?: boolean;
}): Promise<number> {
  const loaded = await loadCatalogue({
    url: options.url,
    dataDir: options.dataDir,
    refreshSeconds: REFRESH_SECONDS,
    refresh: options.refresh,
  });
  const reporting = installReporting();
  const note = catalogueAgeNote(loaded);
  if (note) reporting.onNote?.(note);
  const agent = loaded.catalogue.agents.find((entry) =>
    entry.id === options.id
  );
  if (!agent) {
    throw new RunnerError(
      "provider.unknown",
      `The registry (${loaded.url}) has no agent ${
        JSON.stringify(options.id)
      }; runner providers --registry lists them.`,
      { detail: { provider: options.id } },
    );
  }
  const plan = planLaunch(agent, { where: "here" });
  if (plan.kind !== "binary") {
    console.log(
      `${agent.id} ${agent.version} runs as \`${
        plan.argv.join(" ")
      }\`: ${plan.kind} installs it when it starts; nothing to install here.`,
    );
    return 0;
  }
  const { installed, fresh } = await installAgent({
    dataDir: options.dataDir,
    id: agent.id,
    version: agent.version,
    platform: plan.platform,
    target: plan.target,
    sha256: options.sha256,
    onProgress: (progress) =>
      reporting.onProgress?.({
        ...progress,
        id: agent.id,
        version: agent.version,
      }),
  }).finally(reporting.finish);
  if (options.json) {
    console.log(JSON.stringify({ ...installed.receipt, fresh }, null, 2));
  } else {
    console.log(
      `${
        fresh ? "installed" : "already installed"
      }: ${agent.id} ${agent.version} in ${installed.dir} (sha256 ${installed.receipt.sha256})`,
    );
  }
  return 0;
}

async function removeCommand(
  dataDir: string,
  id: string,
  version?: string,
): Promise<number> {
  const removed = await removeAgent(dataDir, id, version);
  console.log(
    removed.length
      ? `removed: ${id} ${removed.join(", ")}`
      : `${id}${version ? ` ${version}` : ""} is not installed.`,
  );
  return 0;
}

/** One registry agent as `runner providers --registry` shows it. */
export interface RegistryListing {
  id: string;
  name: string;
  version: string;
  /** The distributions it has: `npx`, `uvx`, and the binary platforms. */
  distributions: string[];
  /** What runs on this machine (`binary`, `npx`, `uvx`), or null: nothing. */
  here: string | null;
  /** The versions installed here. */
  installed: string[];
}

/** The registry's agents with what this machine can run of each. */
export function registryListing(
  loaded: LoadedCatalogue,
  dataDir: string,
): RegistryListing[] {
  const installed = listInstalled(dataDir);
  return loaded.catalogue.agents.map((agent) => ({
    id: agent.id,
    name: agent.name,
    version: agent.version,
    distributions: distributionsOf(agent),
    here: runsHere(agent),
    installed: installed.filter((entry) => entry.receipt.id === agent.id)
      .map((entry) => entry.receipt.version),
  }));
}

function distributionsOf(agent: RegistryAgent): string[] {
  const { distribution } = agent;
  return [
    ...(distribution.npx ? ["npx"] : []),
    ...(distribution.uvx ? ["uvx"] : []),
    ...Object.keys(distribution.binary ?? {}).map((platform) =>
      `binary:${platform}`
    ),
  ];
}

function runsHere(agent: RegistryAgent): string | null {
  try {
    return planLaunch(agent, { where: "here" }).kind;
  } catch {
    return null;
  }
}

/** Options of {@linkcode registryProvidersText}. */
export interface RegistryProvidersOptions {
  /** The registry URL. */
  url: string;
  /** The data dir (cache, installs). */
  dataDir: string;
  /** Fetch whatever the cache's age. */
  refresh?: boolean;
  /** JSON instead of a table. */
  json?: boolean;
}

/** What `runner providers --registry` prints. */
export async function registryProvidersText(
  options: RegistryProvidersOptions,
): Promise<string> {
  const loaded = await loadCatalogue({
    url: options.url,
    dataDir: options.dataDir,
    refreshSeconds: REFRESH_SECONDS,
    refresh: options.refresh,
  });
  const agents = registryListing(loaded, options.dataDir);
  const note = catalogueAgeNote(loaded);
  if (options.json) {
    return JSON.stringify(
      {
        url: loaded.url,
        fetchedAt: new Date(loaded.fetchedAt).toISOString(),
        from: loaded.from,
        ...(note ? { note } : {}),
        platform: currentRegistryPlatform() ?? null,
        agents,
        skipped: loaded.catalogue.skipped,
      },
      null,
      2,
    ) + "\n";
  }
  const platform = currentRegistryPlatform() ?? "this platform";
  const rows = agents.map((agent) => [
    agent.id,
    agent.version,
    agent.here ?? `- (no distribution for ${platform})`,
    agent.installed.length ? agent.installed.join(", ") : "-",
    agent.distributions.join(", "),
  ]);
  const lines = [
    `ACP registry agents (provider=<id>) from ${loaded.url}, for ${platform}:`,
    ...(note ? [`  ${note}`] : []),
    ...alignColumns([
      ["ID", "VERSION", "RUNS HERE AS", "INSTALLED", "DISTRIBUTIONS"],
      ...rows,
    ]),
    ...loaded.catalogue.skipped.map((entry) =>
      `  skipped entry ${entry.index}${
        entry.id ? ` (${entry.id})` : ""
      }: ${entry.reason}`
    ),
  ];
  return lines.join("\n") + "\n";
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
