/**
 * The optional `fs/*` client capabilities, confined to the run's workspace.
 * They are advertised only when enabled (`fs-read`, `fs-write`).
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import { isAbsolute, relative, resolve } from "node:path";

/** Which file operations to serve, and under which directory. */
export interface FsAccess {
  /** Serve `fs/read_text_file`. */
  read: boolean;
  /** Serve `fs/write_text_file`. */
  write: boolean;
  /** Only paths under this directory are served. */
  root: string;
}

function confine(root: string, path: string): string {
  const full = resolve(root, path);
  const inside = relative(root, full);
  if (inside.startsWith("..") || isAbsolute(inside)) {
    throw acp.RequestError.invalidParams(
      { path },
      "path is outside the workspace",
    );
  }
  return full;
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
        const text = await Deno.readTextFile(confine(access.root, params.path));
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
        await Deno.writeTextFile(
          confine(access.root, params.path),
          params.content,
        );
        return {};
      },
    );
  }
  return result;
}
