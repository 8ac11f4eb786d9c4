/**
 * The optional `fs/*` client capabilities, confined to the run's workspace.
 * They are advertised only when enabled (`fs-read`, `fs-write`). Confinement
 * is decided on real paths: symlinks are resolved (the file itself, or for a
 * new file its directory), so a link inside the workspace cannot reach out
 * of it. Names that merely start with dots (`..foo`) are ordinary names.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import {
  basename,
  dirname,
  isAbsolute,
  join,
  relative,
  resolve,
  sep,
} from "node:path";

/** Which file operations to serve, and under which directory. */
export interface FsAccess {
  /** Serve `fs/read_text_file`. */
  read: boolean;
  /** Serve `fs/write_text_file`. */
  write: boolean;
  /** Only paths under this directory are served. */
  root: string;
  /** Whether the run's permission rules let the agent write this real path (absent: yes). */
  mayWrite?: (path: string) => boolean;
}

/** Whether `candidate` is `root` or below it (both real, absolute paths). */
export function isInside(root: string, candidate: string): boolean {
  const inside = relative(root, candidate);
  return inside === "" ||
    (inside !== ".." && !inside.startsWith(`..${sep}`) && !isAbsolute(inside));
}

function outside(path: string): acp.RequestError {
  return acp.RequestError.invalidParams(
    { path },
    "path is outside the workspace",
  );
}

async function realPath(path: string): Promise<string | undefined> {
  try {
    return await Deno.realPath(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}

/** The real path of an existing file to read, or an error when it is outside the workspace. */
async function confineRead(root: string, path: string): Promise<string> {
  const realRoot = await Deno.realPath(root);
  const full = resolve(realRoot, path);
  const real = await realPath(full);
  if (real === undefined) throw acp.RequestError.resourceNotFound(path);
  if (!isInside(realRoot, real)) throw outside(path);
  return real;
}

/**
 * The real path of an existing directory inside the workspace (a client
 * terminal's cwd; relative paths are taken from `root`), or an invalid-params
 * error: outside the workspace, missing, or not a directory.
 */
export async function confineDirectory(
  root: string,
  path: string,
): Promise<string> {
  const realRoot = await Deno.realPath(root);
  const real = await realPath(resolve(realRoot, path));
  if (real !== undefined && !isInside(realRoot, real)) throw outside(path);
  const isDirectory = real !== undefined &&
    (await Deno.stat(real)).isDirectory;
  if (!isDirectory) {
    throw acp.RequestError.invalidParams(
      { path },
      "cwd is not a directory in the workspace",
    );
  }
  return real!;
}

/**
 * The real path to write: an existing file's own real path, or a new file's
 * name in its directory's real path; refused outside the workspace, and for
 * a link whose target does not exist (writing would create it anywhere).
 */
async function confineWrite(root: string, path: string): Promise<string> {
  const realRoot = await Deno.realPath(root);
  const full = resolve(realRoot, path);
  const real = await realPath(full);
  if (real !== undefined) {
    if (!isInside(realRoot, real)) throw outside(path);
    return real;
  }
  let linked = false;
  try {
    linked = (await Deno.lstat(full)).isSymlink;
  } catch { /* no such entry: a new file */ }
  if (linked) {
    throw acp.RequestError.invalidParams(
      { path },
      "path is a symbolic link to a missing file",
    );
  }
  const parent = await realPath(dirname(full));
  if (parent === undefined) throw acp.RequestError.resourceNotFound(path);
  if (!isInside(realRoot, parent)) throw outside(path);
  return join(parent, basename(full));
}

/** Adds `fs/*` handlers for the enabled operations to a client app. */
export function fsHandlers(
  app: acp.ClientApp,
  access: FsAccess,
): acp.ClientApp {
  let result = app;
  if (access.read) {
    result = result.onRequest(
      acp.methods.client.fs.readTextFile,
      async ({ params }) => {
        const path = await confineRead(access.root, params.path);
        const text = await Deno.readTextFile(path);
        if (!params.line && !params.limit) return { content: text };
        const lines = text.split("\n");
        const start = Math.max(0, (params.line ?? 1) - 1);
        const end = params.limit ? start + params.limit : undefined;
        return { content: lines.slice(start, end).join("\n") };
      },
    );
  }
  if (access.write) {
    result = result.onRequest(
      acp.methods.client.fs.writeTextFile,
      async ({ params }) => {
        const path = await confineWrite(access.root, params.path);
        if (access.mayWrite && !access.mayWrite(path)) {
          throw acp.RequestError.invalidParams(
            { path: params.path },
            "the run's permission rules reject this write",
          );
        }
        await Deno.writeTextFile(path, params.content);
        return {};
      },
    );
  }
  return result;
}
