/**
 * The optional `fs/*` client capabilities, confined to the run's workspace.
 * They are advertised only when enabled (`fs-read`, `fs-write`). Confinement
 * is decided on real paths: symlinks are resolved (the file itself, or for a
 * new file its directory), so a link inside the workspace cannot reach out
 * of it; on Linux by what the kernel resolved and opened, so an agent that
 * swaps links while it calls cannot either (`confined_files.ts`). Names that
 * merely start with dots (`..foo`) are ordinary names.
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { resolve } from "node:path";
import {
  isInside,
  outside,
  readInside,
  writeInside,
} from "./confined_files.ts";

export { isInside };

/** Which file operations to serve, and under which directory. */
export interface FsAccess {
  /** Serve `fs/read_text_file`. */
  read: boolean;
  /** Serve `fs/write_text_file`. */
  write: boolean;
  /** Only paths under this directory are served. */
  root: string;
  /**
   * `root`'s real path, taken before the agent could swap it (absent: taken
   * at each call).
   */
  realRoot?: string;
  /** Whether the run's permission rules let the agent write this real path (absent: yes). */
  mayWrite?: (path: string) => boolean;
}

/** `path`'s real path; undefined when it cannot be looked up (missing, a file on its way, a link loop, a name too long). */
async function realPath(path: string): Promise<string | undefined> {
  try {
    return await Deno.realPath(path);
  } catch {
    return undefined;
  }
}

/**
 * The real path of an existing directory inside the workspace `realRoot` (a
 * real path; a client terminal's cwd, relative paths taken from it), or an
 * invalid-params error: outside the workspace, missing, or not a directory.
 * A check of a name: whoever then enters the directory must check again
 * where it landed (`lib/run/terminal_cwd.ts`).
 */
export async function confineDirectory(
  realRoot: string,
  path: string,
): Promise<string> {
  const real = await realPath(resolve(realRoot, path));
  if (real !== undefined && !isInside(realRoot, real)) throw outside(path);
  const isDirectory = real !== undefined &&
    (await Deno.stat(real).catch(() => undefined))?.isDirectory;
  if (!isDirectory) {
    throw acp.RequestError.invalidParams(
      { path },
      "cwd is not a directory in the workspace",
    );
  }
  return real!;
}

/** Adds `fs/*` handlers for the enabled operations to a client app. */
export function fsHandlers(
  app: acp.ClientApp,
  access: FsAccess,
): acp.ClientApp {
  const realRoot = async () =>
    access.realRoot ?? await Deno.realPath(access.root);
  let result = app;
  if (access.read) {
    result = result.onRequest(
      acp.methods.client.fs.readTextFile,
      async ({ params }) => {
        const root = await realRoot();
        const text = await readInside(
          root,
          resolve(root, params.path),
          params.path,
        );
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
        const root = await realRoot();
        await writeInside({
          root,
          full: resolve(root, params.path),
          path: params.path,
          content: params.content,
          mayWrite: access.mayWrite,
        });
        return {};
      },
    );
  }
  return result;
}
