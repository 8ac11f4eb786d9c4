/**
 * The ACP agent registry's document (`registry.json`, the format of
 * `agentclientprotocol/registry`'s `FORMAT.md`): read entry by entry, so one
 * malformed agent is skipped with a reason and the others stay usable.
 *
 * @module
 */

/** The registry's platform names: `<os>-<arch>`. */
export const REGISTRY_PLATFORMS = [
  "darwin-aarch64",
  "darwin-x86_64",
  "linux-aarch64",
  "linux-x86_64",
  "windows-aarch64",
  "windows-x86_64",
] as const;

/** One registry platform (`linux-x86_64`, …). */
export type RegistryPlatform = typeof REGISTRY_PLATFORMS[number];

/** An `npx` or `uvx` distribution: run a package. */
export interface PackageDistribution {
  /** The package, perhaps with a version (`@scope/name@1.2.3`, `name==1.2.3`). */
  package: string;
  /** With it, the package's program to run (`npx --package <package> <cmd>`). */
  cmd?: string;
  /** Arguments after the program. */
  args: string[];
  /** Environment the agent needs. */
  env: Record<string, string>;
}

/** A `binary` distribution's target for one platform. */
export interface BinaryTarget {
  /** The archive's URL (`.zip`, `.tar.gz`, `.tgz`, `.tar.bz2`, `.tbz2`, or the program itself). */
  archive: string;
  /** The program inside the archive (`./bin/agent`). */
  cmd: string;
  /** Arguments after the program. */
  args: string[];
  /** Environment the agent needs. */
  env: Record<string, string>;
  /** The archive's sha256, when a mirror gives one (not in the official format). */
  sha256?: string;
}

/** How a registry agent can be run. */
export interface Distribution {
  npx?: PackageDistribution;
  uvx?: PackageDistribution;
  binary?: Partial<Record<RegistryPlatform, BinaryTarget>>;
}

/** One registry agent. */
export interface RegistryAgent {
  /** The id, what `provider` names. */
  id: string;
  /** Its display name. */
  name: string;
  /** The version the registry currently lists. */
  version: string;
  /** One line about it. */
  description: string;
  /** How it can be run. */
  distribution: Distribution;
}

/** An entry that was not usable, and why. */
export interface SkippedEntry {
  /** Its place in `agents`. */
  index: number;
  /** Its id, when it has a readable one. */
  id?: string;
  /** What is wrong with it. */
  reason: string;
}

/** The registry as read: the usable agents and the entries skipped. */
export interface Catalogue {
  /** The document's own `version`. */
  version: string;
  /** The usable agents, by id order of the document. */
  agents: RegistryAgent[];
  /** The malformed entries, each with its reason. */
  skipped: SkippedEntry[];
}

const ID = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const VERSION = /^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const SHA256 = /^[0-9a-f]{64}$/;

/** A well-formed registry id (one path segment, lower case). */
export function isRegistryId(value: string): boolean {
  // `<data dir>/agents/<pgid>.json` are the process table's records.
  return ID.test(value) && !value.endsWith(".json");
}

/** A well-formed registry version (one path segment). */
export function isRegistryVersion(value: string): boolean {
  return VERSION.test(value);
}

/**
 * Reads a registry document. Throws only when the document as a whole is not
 * one (not an object, no `agents` list); a malformed entry is skipped.
 */
export function readCatalogue(document: unknown): Catalogue {
  if (!isRecord(document) || !Array.isArray(document.agents)) {
    throw new TypeError("not an ACP registry document (no agents list)");
  }
  const agents: RegistryAgent[] = [];
  const skipped: SkippedEntry[] = [];
  const seen = new Set<string>();
  document.agents.forEach((entry: unknown, index: number) => {
    const id = isRecord(entry) && typeof entry.id === "string"
      ? entry.id
      : undefined;
    try {
      const agent = readAgent(entry);
      if (seen.has(agent.id)) throw new TypeError("a second entry for its id");
      seen.add(agent.id);
      agents.push(agent);
    } catch (error) {
      skipped.push({
        index,
        ...(id === undefined ? {} : { id: id.slice(0, 80) }),
        reason: error instanceof Error ? error.message : String(error),
      });
    }
  });
  return {
    version: typeof document.version === "string" ? document.version : "",
    agents,
    skipped,
  };
}

function readAgent(entry: unknown): RegistryAgent {
  if (!isRecord(entry)) throw new TypeError("not an object");
  const id = entry.id;
  if (typeof id !== "string" || !isRegistryId(id)) {
    throw new TypeError(
      "id must be lower-case letters, digits, . _ - (not ending in .json)",
    );
  }
  const version = entry.version;
  if (typeof version !== "string" || !VERSION.test(version)) {
    throw new TypeError("version must be a plain version string");
  }
  const distribution = readDistribution(entry.distribution);
  return {
    id,
    name: typeof entry.name === "string" ? entry.name : id,
    version,
    description: typeof entry.description === "string" ? entry.description : "",
    distribution,
  };
}

function readDistribution(value: unknown): Distribution {
  if (!isRecord(value)) throw new TypeError("distribution must be an object");
  const distribution: Distribution = {};
  if (value.npx !== undefined) distribution.npx = readPackage(value.npx, "npx");
  if (value.uvx !== undefined) distribution.uvx = readPackage(value.uvx, "uvx");
  if (value.binary !== undefined) {
    if (!isRecord(value.binary)) {
      throw new TypeError("distribution.binary must be an object");
    }
    const binary: Partial<Record<RegistryPlatform, BinaryTarget>> = {};
    for (const [platform, target] of Object.entries(value.binary)) {
      if (!(REGISTRY_PLATFORMS as readonly string[]).includes(platform)) {
        continue; // a platform this runner does not know is not an error
      }
      binary[platform as RegistryPlatform] = readBinary(target, platform);
    }
    distribution.binary = binary;
  }
  if (!distribution.npx && !distribution.uvx && !distribution.binary) {
    throw new TypeError("distribution names no npx, uvx or binary");
  }
  return distribution;
}

function readPackage(value: unknown, kind: string): PackageDistribution {
  if (!isRecord(value)) throw new TypeError(`${kind} must be an object`);
  const pkg = value.package;
  if (typeof pkg !== "string" || !/^[@A-Za-z0-9][\w@./=<>~^!+-]*$/.test(pkg)) {
    throw new TypeError(`${kind}.package must be a package name`);
  }
  const cmd = value.cmd;
  if (cmd !== undefined && (typeof cmd !== "string" || !isProgramName(cmd))) {
    throw new TypeError(`${kind}.cmd must be a program name`);
  }
  return {
    package: pkg,
    ...(cmd === undefined ? {} : { cmd }),
    args: readArgs(value.args, kind),
    env: readEnv(value.env, kind),
  };
}

function readBinary(value: unknown, platform: string): BinaryTarget {
  const where = `binary.${platform}`;
  if (!isRecord(value)) throw new TypeError(`${where} must be an object`);
  const archive = value.archive;
  let url: URL | undefined;
  try {
    url = typeof archive === "string" ? new URL(archive) : undefined;
  } catch { /* below */ }
  if (
    !url || !["https:", "http:", "file:"].includes(url.protocol) ||
    typeof archive !== "string"
  ) {
    throw new TypeError(`${where}.archive must be an http(s) or file URL`);
  }
  const cmd = value.cmd;
  if (typeof cmd !== "string" || !isInsidePath(cmd)) {
    throw new TypeError(
      `${where}.cmd must be a relative path inside the archive`,
    );
  }
  const sha256 = value.sha256;
  if (
    sha256 !== undefined &&
    (typeof sha256 !== "string" || !SHA256.test(sha256.toLowerCase()))
  ) {
    throw new TypeError(`${where}.sha256 must be 64 hex digits`);
  }
  return {
    archive,
    cmd,
    args: readArgs(value.args, where),
    env: readEnv(value.env, where),
    ...(typeof sha256 === "string" ? { sha256: sha256.toLowerCase() } : {}),
  };
}

function readArgs(value: unknown, where: string): string[] {
  if (value === undefined) return [];
  if (
    !Array.isArray(value) || !value.every((arg) => typeof arg === "string")
  ) {
    throw new TypeError(`${where}.args must be a list of strings`);
  }
  return value;
}

function readEnv(value: unknown, where: string): Record<string, string> {
  if (value === undefined) return {};
  if (!isRecord(value)) throw new TypeError(`${where}.env must be an object`);
  const env: Record<string, string> = {};
  for (const [name, text] of Object.entries(value)) {
    if (!ENV_NAME.test(name) || typeof text !== "string") {
      throw new TypeError(`${where}.env must map variable names to strings`);
    }
    env[name] = text;
  }
  return env;
}

/** A plain program name (no directory). */
function isProgramName(value: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(value);
}

/** A relative path that stays inside its directory (`./bin/agent`, `agent.exe`). */
export function isInsidePath(value: string): boolean {
  if (!value || value.includes("\0") || value.includes("\\")) return false;
  if (value.startsWith("/") || /^[A-Za-z]:/.test(value)) return false;
  const parts = value.split("/").filter((part) => part !== "" && part !== ".");
  return parts.length > 0 && !parts.includes("..");
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
