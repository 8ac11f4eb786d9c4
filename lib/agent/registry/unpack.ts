/**
 * Unpacks a downloaded agent into a fresh directory: `.tar.gz`/`.tgz`,
 * `.zip`, `.tar.bz2`/`.tbz2` (with the system's `bzip2`) or a raw program.
 * Nothing lands outside the directory: names with `..` or absolute paths,
 * links that lead out (or nowhere), device files and archives past the size
 * limit are refused. The program gets its run bit.
 *
 * @module
 */

import { dirname, join, normalize, relative, resolve } from "node:path";
import {
  ArchiveBudget,
  type ArchiveEntry,
  type ArchiveLimits,
  archiveRefused,
  DEFAULT_ARCHIVE_LIMITS,
  safeEntryPath,
} from "./archive_entry.ts";
import { readTar } from "./tar_reader.ts";
import { readZip } from "./zip_reader.ts";
import { bunzipLimited, inflateLimited } from "./decompress.ts";

/** What an archive's URL says it is. */
export type ArchiveKind = "tar.gz" | "tar.bz2" | "zip" | "raw";

/** The kind of archive at `url`, by its name's ending. */
export function archiveKindOf(url: string): ArchiveKind {
  const path = new URL(url).pathname.toLowerCase();
  if (path.endsWith(".tar.gz") || path.endsWith(".tgz")) return "tar.gz";
  if (path.endsWith(".tar.bz2") || path.endsWith(".tbz2")) return "tar.bz2";
  if (path.endsWith(".zip")) return "zip";
  return "raw";
}

/** Options for {@linkcode unpackAgent}. */
export interface UnpackOptions {
  /** The downloaded bytes. */
  bytes: Uint8Array;
  /** What they are. */
  kind: ArchiveKind;
  /** A directory that does not exist yet; made here. */
  into: string;
  /** The program inside (the registry's `cmd`); a raw download is written there. */
  cmd: string;
  /** Size and entry limits (default {@linkcode DEFAULT_ARCHIVE_LIMITS}). */
  limits?: ArchiveLimits;
}

/** What was unpacked. */
export interface Unpacked {
  /** The program's absolute path. */
  program: string;
  /** How many files. */
  files: number;
  /** Their bytes together. */
  bytes: number;
}

/** The members of an archive, checked by its reader. */
export async function readArchive(
  bytes: Uint8Array,
  kind: Exclude<ArchiveKind, "raw">,
  limits: ArchiveLimits = DEFAULT_ARCHIVE_LIMITS,
): Promise<ArchiveEntry[]> {
  const budget = new ArchiveBudget(limits);
  // A tar's headers count too: allow a little over the file budget.
  const tarLimit = limits.maxBytes + 512 * (limits.maxEntries + 2) * 2;
  if (kind === "zip") return await readZip(bytes, budget);
  const tar = kind === "tar.gz"
    ? await inflateLimited(bytes, "gzip", tarLimit)
    : await bunzipLimited(bytes, tarLimit);
  return readTar(tar, budget);
}

/**
 * Unpacks `bytes` into `into` and sets the program's run bit.
 *
 * @throws {RunnerError} `agent.archive_refused` for a hostile, damaged or
 * oversized archive, or one without the program; `into` may then hold a
 * part, for the caller to remove.
 */
export async function unpackAgent(options: UnpackOptions): Promise<Unpacked> {
  const limits = options.limits ?? DEFAULT_ARCHIVE_LIMITS;
  const cmdPath = safeEntryPath(options.cmd);
  if (options.kind === "raw") {
    new ArchiveBudget(limits).spend(options.bytes.length);
  }
  const entries: ArchiveEntry[] = options.kind === "raw"
    ? [{ path: cmdPath, kind: "file", mode: 0o755, data: options.bytes }]
    : await readArchive(options.bytes, options.kind, limits);
  await Deno.mkdir(options.into, { recursive: false, mode: 0o755 });
  const root = await Deno.realPath(options.into);
  // Links last: no file or directory is ever written through one.
  const written = await writeFiles(root, entries);
  await makeLinks(root, entries.filter((entry) => entry.kind === "symlink"));
  const program = join(root, cmdPath);
  if (!await Deno.lstat(program).catch(() => undefined)) {
    throw archiveRefused(
      `it holds no program at ${cmdPath} (the registry's cmd)`,
    );
  }
  const real = await insideRoot(root, program, `the program ${cmdPath}`);
  const info = await Deno.stat(real).catch(() => undefined);
  if (!info?.isFile) {
    throw archiveRefused(
      `it holds no program at ${cmdPath} (the registry's cmd)`,
    );
  }
  if (Deno.build.os !== "windows") {
    await Deno.chmod(real, safeMode(info.mode ?? 0o755) | 0o755);
  }
  let bytes = 0;
  for (const entry of written.values()) bytes += entry.data!.length;
  return { program, files: written.size, bytes };
}

/** Makes the directories, then writes the files (hard links as copies). */
async function writeFiles(
  root: string,
  entries: ArchiveEntry[],
): Promise<Map<string, ArchiveEntry>> {
  for (const entry of entries.filter((entry) => entry.kind === "directory")) {
    await Deno.mkdir(join(root, entry.path), { recursive: true, mode: 0o755 });
  }
  const written = new Map<string, ArchiveEntry>();
  for (const entry of entries) {
    if (entry.kind !== "file" && entry.kind !== "hardlink") continue;
    if (written.has(entry.path)) {
      throw archiveRefused(`entry ${JSON.stringify(entry.path)} comes twice`);
    }
    const data = entry.kind === "file"
      ? entry.data!
      : hardlinkData(entry, written);
    const path = join(root, entry.path);
    try {
      await Deno.mkdir(dirname(path), { recursive: true, mode: 0o755 });
      await Deno.writeFile(path, data, {
        createNew: true,
        mode: safeMode(entry.mode),
      });
    } catch (error) {
      throw archiveRefused(
        `entry ${JSON.stringify(entry.path)} cannot be written (${
          error instanceof Error ? error.message : error
        })`,
      );
    }
    written.set(entry.path, { ...entry, kind: "file", data });
  }
  return written;
}

/** Makes the symbolic links, each only if it leads to something inside `root`. */
async function makeLinks(root: string, links: ArchiveEntry[]): Promise<void> {
  checkLinkPlan(links);
  for (const link of links) {
    const target = link.target ?? "";
    const lexical = normalize(join(dirname(link.path), target));
    if (
      !target || target.startsWith("/") || /^[A-Za-z]:/.test(target) ||
      lexical === ".." || lexical.startsWith("../")
    ) {
      throw archiveRefused(
        `link ${JSON.stringify(link.path)} leads outside its directory (${
          JSON.stringify(target)
        })`,
      );
    }
    const path = join(root, link.path);
    try {
      await Deno.mkdir(dirname(path), { recursive: true });
      await Deno.symlink(target, path);
    } catch (error) {
      throw archiveRefused(
        `link ${JSON.stringify(link.path)} cannot be made (${
          error instanceof Error ? error.message : error
        })`,
      );
    }
  }
  // A chain of links can lead out where each looked in: check where each really leads.
  for (const link of links) {
    await insideRoot(
      root,
      join(root, link.path),
      `link ${JSON.stringify(link.path)}`,
    );
  }
}

/**
 * Refuses, before any link is made, a link whose own directories or whose
 * target's way passes through another link of the archive: the kernel
 * follows such a link where the text of each target looked inside (a link
 * to "..", then a link or directories made through it). A target may end at
 * another link: every link is held to the same rule.
 */
function checkLinkPlan(links: ArchiveEntry[]): void {
  const linkPaths = new Set(links.map((link) => normalize(link.path)));
  const refuse = (link: ArchiveEntry, why: string) =>
    archiveRefused(
      `link ${JSON.stringify(link.path)} ${why} (${
        JSON.stringify(link.target ?? "")
      })`,
    );
  for (const link of links) {
    const parts = normalize(link.path).split("/");
    for (let depth = 1; depth < parts.length; depth++) {
      if (linkPaths.has(parts.slice(0, depth).join("/"))) {
        throw refuse(link, "lies behind another link");
      }
    }
    const way = parts.slice(0, -1);
    const steps = (link.target ?? "").split("/").filter((step) =>
      step && step !== "."
    );
    for (const [index, step] of steps.entries()) {
      if (step === "..") {
        if (!way.length) throw refuse(link, "leads outside its directory");
        way.pop();
        continue;
      }
      way.push(step);
      if (index < steps.length - 1 && linkPaths.has(way.join("/"))) {
        throw refuse(link, "leads through another link");
      }
    }
  }
}

function hardlinkData(
  entry: ArchiveEntry,
  written: Map<string, ArchiveEntry>,
): Uint8Array {
  const target = safeEntryPath(entry.target ?? "");
  const file = written.get(target);
  if (!file?.data) {
    throw archiveRefused(
      `hard link ${
        JSON.stringify(entry.path)
      } names no earlier file of the archive (${JSON.stringify(entry.target)})`,
    );
  }
  return file.data;
}

/** Where `path` really leads, if inside `root`; refused when out or nowhere. */
async function insideRoot(
  root: string,
  path: string,
  what: string,
): Promise<string> {
  let real: string;
  try {
    real = await Deno.realPath(path);
  } catch {
    throw archiveRefused(`${what} leads nowhere`);
  }
  const rel = relative(root, real);
  if (rel === ".." || rel.startsWith("../") || resolve(root, rel) !== real) {
    throw archiveRefused(`${what} leads outside its directory`);
  }
  return real;
}

/** Permission bits without setuid, setgid, sticky or write for others. */
function safeMode(mode = 0o644): number {
  return (mode & 0o755) | 0o600;
}
