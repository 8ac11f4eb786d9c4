/**
 * Reading and writing a file only when it lies inside a directory, decided
 * on what the kernel resolved rather than on a name checked before the open:
 * a name checked and then opened again can be swapped for a symbolic link in
 * between (`docs/config.md`, "File access").
 *
 * On Linux a name is first pinned (`O_PATH`: resolved, links followed, but
 * not opened, so no device or FIFO is touched), the kernel's path of what it
 * pinned (`/proc/self/fd/N`'s link) must lie inside the root, and only that
 * pinned file is then opened, through `/proc/self/fd/N`. A new file is
 * created through its pinned and checked directory (`/proc/self/fd/N/name`),
 * exclusively and without following a link. Nothing outside the root is
 * read, created or changed, even for a moment, whatever the agent swaps
 * meanwhile.
 *
 * Where `/proc/self/fd` does not exist (macOS) names are checked by real
 * path just before the open, which a racing agent can defeat.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, sep } from "node:path";

/** Whether `candidate` is `root` or below it (both real, absolute paths). */
export function isInside(root: string, candidate: string): boolean {
  const inside = relative(root, candidate);
  return inside === "" ||
    (inside !== ".." && !inside.startsWith(`..${sep}`) && !isAbsolute(inside));
}

/** The answer to a path outside the root. */
export function outside(path: string): acp.RequestError {
  return acp.RequestError.invalidParams(
    { path },
    "path is outside the workspace",
  );
}

/** Whether the kernel pins and names files here (`O_PATH`, `/proc/self/fd`). */
const PINNED = Deno.build.os === "linux";

/** Linux's `O_PATH` (the same on x86-64 and arm64; `node:fs` lacks it). */
const O_PATH = 0o10000000;

/** A name resolved by the kernel, and the kernel's path of it. */
interface Pinned {
  handle: FileHandle;
  /** The kernel's path of the pinned file. */
  real: string;
  /** A name that always leads to the pinned file (`/proc/self/fd/N`). */
  name: string;
}

function code(error: unknown): string | undefined {
  return (error as { code?: string } | null)?.code;
}

function missing(error: unknown): boolean {
  return code(error) === "ENOENT" || code(error) === "ENOTDIR";
}

/** Pins `path` (links followed); undefined when nothing is there. */
async function pin(
  path: string,
  flags = 0,
): Promise<Pinned | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(path, O_PATH | flags);
  } catch (error) {
    if (missing(error)) return undefined;
    throw error;
  }
  const name = `/proc/self/fd/${handle.fd}`;
  try {
    return { handle, real: await Deno.readLink(name), name };
  } catch (error) {
    await handle.close();
    throw error;
  }
}

async function realPathIfThere(path: string): Promise<string | undefined> {
  try {
    return await Deno.realPath(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/** Refuses anything but a regular file (a FIFO would block, a device is not text). */
async function requireFile(handle: FileHandle, path: string): Promise<void> {
  const stat = await handle.stat();
  if (stat.isFile()) return;
  throw acp.RequestError.invalidParams(
    { path },
    stat.isDirectory() ? "path is a directory" : "path is not a regular file",
  );
}

/**
 * The text of the file at `full` (absolute; `path` as the agent named it)
 * if it lies inside `root` (a real path); else an error, and nothing outside
 * was opened.
 */
export async function readInside(
  root: string,
  full: string,
  path: string,
): Promise<string> {
  if (!PINNED) {
    return await Deno.readTextFile(await checkedRealPath(root, full, path));
  }
  const pinned = await pin(full);
  if (!pinned) throw acp.RequestError.resourceNotFound(path);
  try {
    if (!isInside(root, pinned.real)) throw outside(path);
    await requireFile(pinned.handle, path);
    const file = await open(pinned.name, constants.O_RDONLY);
    try {
      return await file.readFile({ encoding: "utf8" });
    } finally {
      await file.close();
    }
  } finally {
    await pinned.handle.close();
  }
}

/** Best effort without pinning: the real path, checked now. */
async function checkedRealPath(
  root: string,
  full: string,
  path: string,
): Promise<string> {
  const real = await realPathIfThere(full);
  if (real === undefined) throw acp.RequestError.resourceNotFound(path);
  if (!isInside(root, real)) throw outside(path);
  return real;
}

/** Options for {@linkcode writeInside}. */
export interface WriteInsideOptions {
  /** The directory writes stay in (a real path). */
  root: string;
  /** The file, absolute. */
  full: string;
  /** The path as the agent named it (for errors). */
  path: string;
  /** The text to write. */
  content: string;
  /** Decides on the real path about to be written; false: refused, nothing written. */
  mayWrite?: (real: string) => boolean;
}

/** Attempts at a file that keeps appearing and vanishing under a write. */
const WRITE_ATTEMPTS = 8;

/**
 * Writes `content` to the file at `full` if it lies inside `root`: an
 * existing file (or one a link inside leads to) is replaced in place, a new
 * one is created; a link to a missing file is refused. Nothing outside
 * `root` is created or changed.
 */
export async function writeInside(options: WriteInsideOptions): Promise<void> {
  if (!PINNED) return await writeChecked(options);
  const { root, full, path } = options;
  const directory = await pin(dirname(full), constants.O_DIRECTORY);
  if (!directory) throw acp.RequestError.resourceNotFound(path);
  try {
    if (!isInside(root, directory.real)) throw outside(path);
    const name = basename(full);
    // The kernel resolves this to the directory just checked, whatever its
    // name leads to by now.
    const there = join(directory.name, name);
    const real = join(directory.real, name);
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const file = await openExisting(options, there) ??
        await createNew(options, { there, real });
      if (!file) continue;
      try {
        await file.truncate(0);
        await file.writeFile(options.content, { encoding: "utf8" });
      } finally {
        await file.close();
      }
      return;
    }
    throw acp.RequestError.invalidParams(
      { path },
      "the file kept changing while it was being written",
    );
  } finally {
    await directory.handle.close();
  }
}

/** The existing file at `there`, checked and opened for writing (not yet changed); undefined when nothing is there. */
async function openExisting(
  options: WriteInsideOptions,
  there: string,
): Promise<FileHandle | undefined> {
  const { root, path } = options;
  const pinned = await pin(there);
  if (!pinned) {
    if ((await lstatIfThere(there))?.isSymlink) {
      throw acp.RequestError.invalidParams(
        { path },
        "path is a symbolic link to a missing file",
      );
    }
    return undefined;
  }
  try {
    if (!isInside(root, pinned.real)) throw outside(path);
    await requireFile(pinned.handle, path);
    if (options.mayWrite && !options.mayWrite(pinned.real)) {
      throw rejected(path);
    }
    return await open(pinned.name, constants.O_WRONLY);
  } finally {
    await pinned.handle.close();
  }
}

/** Creates the file exclusively, never through a link; undefined when a file appeared there meanwhile. */
async function createNew(
  options: WriteInsideOptions,
  target: { there: string; real: string },
): Promise<FileHandle | undefined> {
  if (options.mayWrite && !options.mayWrite(target.real)) {
    throw rejected(options.path);
  }
  try {
    return await open(
      target.there,
      constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL |
        constants.O_NOFOLLOW,
      0o666,
    );
  } catch (error) {
    if (code(error) === "EEXIST") return undefined;
    if (missing(error)) throw acp.RequestError.resourceNotFound(options.path);
    throw error;
  }
}

/** Best effort without pinning: the file's (or its directory's) real path, checked now. */
async function writeChecked(options: WriteInsideOptions): Promise<void> {
  const { root, full, path } = options;
  let real = await realPathIfThere(full);
  if (real === undefined) {
    if ((await lstatIfThere(full))?.isSymlink) {
      throw acp.RequestError.invalidParams(
        { path },
        "path is a symbolic link to a missing file",
      );
    }
    const parent = await realPathIfThere(dirname(full));
    if (parent === undefined) throw acp.RequestError.resourceNotFound(path);
    real = join(parent, basename(full));
  }
  if (!isInside(root, real)) throw outside(path);
  if (options.mayWrite && !options.mayWrite(real)) throw rejected(path);
  await Deno.writeTextFile(real, options.content);
}

function rejected(path: string): acp.RequestError {
  return acp.RequestError.invalidParams(
    { path },
    "the run's permission rules reject this write",
  );
}

async function lstatIfThere(path: string): Promise<Deno.FileInfo | undefined> {
  try {
    return await Deno.lstat(path);
  } catch (error) {
    if (missing(error) || error instanceof Deno.errors.NotFound) {
      return undefined;
    }
    throw error;
  }
}
