/**
 * Downloads an agent's archive (http(s) or file URL) with progress, refused
 * past a size limit.
 *
 * @module
 */

import { fileURLToPath as fromFileUrl } from "node:url";
import { RunnerError } from "../../errors.ts";
import { readLimited, shownUrl, withShownUrl } from "./source.ts";

/** The largest archive downloaded by default (512 MiB). */
export const MAX_DOWNLOAD_BYTES = 512 * 1024 * 1024;
/** How long a download may wait for its first answer. */
const CONNECT_TIMEOUT_MS = 60_000;

/** Progress of a download. */
export interface DownloadProgress {
  /** Bytes received so far. */
  received: number;
  /** The size the server announced, when it did. */
  total?: number;
}

/** Options for {@linkcode downloadArchive}. */
export interface DownloadOptions {
  /** The archive's URL. */
  url: string;
  /** Refuse past this many bytes (default {@linkcode MAX_DOWNLOAD_BYTES}). */
  maxBytes?: number;
  /** Called as bytes arrive. */
  onProgress?: (progress: DownloadProgress) => void;
}

/**
 * The archive's bytes.
 *
 * @throws {RunnerError} `agent.download_failed` (with the URL) when it
 * cannot be fetched or is larger than the limit.
 */
export async function downloadArchive(
  options: DownloadOptions,
): Promise<Uint8Array> {
  const limit = options.maxBytes ?? MAX_DOWNLOAD_BYTES;
  const { url } = options;
  try {
    if (url.startsWith("file:")) {
      const path = fromFileUrl(url);
      const { size } = await Deno.stat(path);
      if (size > limit) throw new RangeError(`larger than ${limit} bytes`);
      const bytes = await Deno.readFile(path);
      options.onProgress?.({ received: bytes.length, total: bytes.length });
      return bytes;
    }
    const timeout = AbortSignal.timeout(CONNECT_TIMEOUT_MS);
    const response = await fetch(url, { signal: timeout, redirect: "follow" });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`HTTP ${response.status}`);
    }
    const announced = Number(response.headers.get("content-length"));
    const total = Number.isSafeInteger(announced) && announced > 0
      ? announced
      : undefined;
    if (total !== undefined && total > limit) {
      await response.body?.cancel();
      throw new RangeError(`larger than ${limit} bytes`);
    }
    return await readLimited(
      response,
      limit,
      (received) => options.onProgress?.({ received, total }),
    );
  } catch (error) {
    const reason = withShownUrl(
      error instanceof Error ? error.message : String(error),
      url,
    );
    throw new RunnerError(
      "agent.download_failed",
      `The agent's archive could not be downloaded from ${
        shownUrl(url)
      } (${reason}). Check the network and the registry entry, then try again.`,
      {
        detail: { url: shownUrl(url) },
        retryable: !(error instanceof RangeError),
        cause: error,
      },
    );
  }
}
