/**
 * Installed registry agents: `<data dir>/agents/<id>/<version>/` holds the
 * unpacked `files/` and the `receipt.json` (what was installed, from where,
 * its sha256). An install is made in a temporary directory beside it and
 * renamed into place, so a version directory with a receipt is a whole
 * install; installs of one agent are serialised across processes by a lock
 * file; a different archive under an id and version seen before is refused.
 *
 * @module
 */

import { join } from "node:path";
import { createHash } from "node:crypto";
import { RunnerError } from "../../errors.ts";
import type { BinaryTarget, RegistryPlatform } from "./catalogue.ts";
import { downloadArchive, type DownloadProgress } from "./download.ts";
import { archiveKindOf, unpackAgent } from "./unpack.ts";
import type { ArchiveLimits } from "./archive_entry.ts";
import { archiveRefused } from "./archive_entry.ts";
import { shownUrl } from "./source.ts";

/** What an install records. */
export interface Receipt {
  /** The registry id. */
  id: string;
  /** The version installed. */
  version: string;
  /** The platform it was installed for. */
  platform: RegistryPlatform;
  /** The archive's URL. */
  archive: string;
  /** The sha256 of the archive as downloaded. */
  sha256: string;
  /** The program, relative to `files/`. */
  cmd: string;
  /** Its arguments. */
  args: string[];
  /** The environment the registry gives it. */
  env: Record<string, string>;
  /** When (ISO 8601). */
  installedAt: string;
  /** How many files were unpacked. */
  files: number;
  /** Their bytes together. */
  bytes: number;
}

/** An installed agent: its receipt and where it is. */
export interface InstalledAgent {
  /** The receipt. */
  receipt: Receipt;
  /** `<data dir>/agents/<id>/<version>`: what a confined run may read. */
  dir: string;
  /** The program's absolute path. */
  program: string;
}

/** The directory every installed agent lives in. */
export function agentsDir(dataDir: string): string {
  return join(dataDir, "agents");
}

/** The installed `id` at `version`, if a whole install is there. */
export function installedAgent(
  dataDir: string,
  id: string,
  version: string,
): InstalledAgent | undefined {
  const dir = join(agentsDir(dataDir), id, version);
  let receipt: Receipt;
  try {
    receipt = JSON.parse(Deno.readTextFileSync(join(dir, "receipt.json")));
  } catch {
    return undefined;
  }
  if (receipt.id !== id || receipt.version !== version) return undefined;
  return { receipt, dir, program: join(dir, "files", receipt.cmd) };
}

/** Every whole install, by id then version. */
export function listInstalled(dataDir: string): InstalledAgent[] {
  const found: InstalledAgent[] = [];
  for (const id of namesIn(agentsDir(dataDir))) {
    for (const version of namesIn(join(agentsDir(dataDir), id))) {
      const installed = installedAgent(dataDir, id, version);
      if (installed) found.push(installed);
    }
  }
  return found;
}

function namesIn(dir: string): string[] {
  try {
    return [...Deno.readDirSync(dir)]
      .filter((entry) => entry.isDirectory && !entry.name.startsWith("."))
      .map((entry) => entry.name)
      .sort();
  } catch {
    return [];
  }
}

/** Options for {@linkcode installAgent}. */
export interface InstallOptions {
  /** The runner's data dir. */
  dataDir: string;
  /** The registry id. */
  id: string;
  /** The version. */
  version: string;
  /** The platform. */
  platform: RegistryPlatform;
  /** The registry's binary target for it. */
  target: BinaryTarget;
  /** The operator's expected sha256 (else the target's, when a mirror gives one). */
  sha256?: string;
  /** Download progress, when this call downloads. */
  onProgress?: (progress: DownloadProgress) => void;
  /** Unpack limits (tests make them small). */
  limits?: ArchiveLimits;
  /** The most bytes downloaded. */
  maxDownloadBytes?: number;
}

/**
 * Installs `id` at `version` unless it is installed; returns it, and whether
 * this call installed it. Waits for another process installing the same
 * agent. A failed install leaves nothing behind.
 *
 * @throws {RunnerError} `agent.download_failed`, `agent.checksum_mismatch`
 * or `agent.archive_refused`.
 */
export async function installAgent(
  options: InstallOptions,
): Promise<{ installed: InstalledAgent; fresh: boolean }> {
  const { dataDir, id, version } = options;
  const ready = installedAgent(dataDir, id, version);
  if (ready) return { installed: ready, fresh: false };
  const agentDir = join(agentsDir(dataDir), id);
  await Deno.mkdir(agentDir, { recursive: true });
  return await withAgentLock(agentDir, async () => {
    // Another process may have installed it while this one waited.
    const now = installedAgent(dataDir, id, version);
    if (now) return { installed: now, fresh: false };
    await removeLeftovers(agentDir, version);
    const partial = join(agentDir, `.partial-${crypto.randomUUID()}`);
    try {
      const installed = await installInto(partial, options);
      await Deno.rename(partial, join(agentDir, version));
      await rememberArchive(agentDir, installed.receipt);
      return {
        installed: installedAgent(dataDir, id, version)!,
        fresh: true,
      };
    } finally {
      await Deno.remove(partial, { recursive: true }).catch(() => {});
    }
  });
}

async function installInto(
  partial: string,
  options: InstallOptions,
): Promise<{ receipt: Receipt }> {
  const { target } = options;
  const bytes = await downloadArchive({
    url: target.archive,
    onProgress: options.onProgress,
    maxBytes: options.maxDownloadBytes,
  });
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const agentDir = join(partial, "..");
  const expected = options.sha256?.toLowerCase() ?? target.sha256;
  const seen = await seenArchive(agentDir, options.version, options.platform);
  if (expected !== undefined && expected !== sha256) {
    throw checksumMismatch(options, sha256, `the expected ${expected}`);
  }
  if (seen !== undefined && seen.sha256 !== sha256) {
    throw checksumMismatch(
      options,
      sha256,
      `the ${seen.sha256} installed before under ${options.id} ${options.version} (from ${seen.archive})`,
    );
  }
  await Deno.mkdir(partial);
  let unpacked;
  try {
    unpacked = await unpackAgent({
      bytes,
      kind: archiveKindOf(target.archive),
      into: join(partial, "files"),
      cmd: target.cmd,
      limits: options.limits,
    });
  } catch (error) {
    if (error instanceof RunnerError) throw error;
    throw archiveRefused(
      error instanceof Error ? error.message : String(error),
    );
  }
  const receipt: Receipt = {
    id: options.id,
    version: options.version,
    platform: options.platform,
    archive: shownUrl(target.archive),
    sha256,
    cmd: target.cmd,
    args: target.args,
    env: target.env,
    installedAt: new Date().toISOString(),
    files: unpacked.files,
    bytes: unpacked.bytes,
  };
  await Deno.writeTextFile(
    join(partial, "receipt.json"),
    JSON.stringify(receipt, null, 2) + "\n",
  );
  return { receipt };
}

function checksumMismatch(
  options: InstallOptions,
  got: string,
  wanted: string,
): RunnerError {
  return new RunnerError(
    "agent.checksum_mismatch",
    `The archive of ${options.id} ${options.version} from ${
      shownUrl(options.target.archive)
    } has sha256 ${got}, not ${wanted}; it was not installed. The archive changed or was tampered with: ask the registry's maintainers, or remove the agent (runner agents remove ${options.id}) only if you trust the new archive.`,
    { detail: { id: options.id, version: options.version, sha256: got } },
  );
}

/** The sha256 each id, version and platform was installed with, kept after a remove. */
interface SeenArchives {
  [versionAndPlatform: string]: { archive: string; sha256: string };
}

function seenPath(agentDir: string): string {
  return join(agentDir, ".seen.json");
}

async function readSeen(agentDir: string): Promise<SeenArchives> {
  try {
    return JSON.parse(await Deno.readTextFile(seenPath(agentDir)));
  } catch {
    return {};
  }
}

async function seenArchive(
  agentDir: string,
  version: string,
  platform: string,
): Promise<{ archive: string; sha256: string } | undefined> {
  return (await readSeen(agentDir))[`${version} ${platform}`];
}

async function rememberArchive(
  agentDir: string,
  receipt: Receipt,
): Promise<void> {
  const seen = await readSeen(agentDir);
  seen[`${receipt.version} ${receipt.platform}`] = {
    archive: receipt.archive,
    sha256: receipt.sha256,
  };
  const temp = `${seenPath(agentDir)}.tmp`;
  await Deno.writeTextFile(temp, JSON.stringify(seen, null, 2) + "\n");
  await Deno.rename(temp, seenPath(agentDir));
}

/** Partial installs of crashed processes, and a version directory without its receipt. */
async function removeLeftovers(agentDir: string, version: string) {
  for await (const entry of Deno.readDir(agentDir)) {
    if (entry.name.startsWith(".partial-")) {
      await Deno.remove(join(agentDir, entry.name), { recursive: true })
        .catch(() => {});
    }
  }
  await Deno.remove(join(agentDir, version), { recursive: true })
    .catch(() => {});
}

/**
 * Removes `id` (one version, or all); returns the versions removed. What it
 * was installed with stays remembered, so a different archive under the same
 * version is still refused.
 */
export async function removeAgent(
  dataDir: string,
  id: string,
  version?: string,
): Promise<string[]> {
  const agentDir = join(agentsDir(dataDir), id);
  const versions = version ? [version] : namesIn(agentDir);
  if (!versions.length) return [];
  return await withAgentLock(agentDir, async () => {
    const removed: string[] = [];
    for (const each of versions) {
      if (!installedAgent(dataDir, id, each)) continue;
      // Renamed first, so no run starts a half-removed agent.
      const doomed = join(agentDir, `.partial-${crypto.randomUUID()}`);
      await Deno.rename(join(agentDir, each), doomed);
      await Deno.remove(doomed, { recursive: true });
      removed.push(each);
    }
    return removed;
  });
}

/** Runs `work` holding the agent's lock file: one install or remove at a time, across processes. */
async function withAgentLock<T>(
  agentDir: string,
  work: () => Promise<T>,
): Promise<T> {
  await Deno.mkdir(agentDir, { recursive: true });
  const file = await Deno.open(join(agentDir, ".lock"), {
    create: true,
    write: true,
  });
  try {
    await file.lock(true);
    return await work();
  } finally {
    file.close();
  }
}
