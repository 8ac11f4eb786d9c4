/**
 * Decompression that stops at a limit: a small archive that inflates to
 * gigabytes (a "zip bomb") is refused, not unpacked.
 *
 * @module
 */

import { archiveRefused } from "./archive_entry.ts";

/**
 * `bytes` decompressed (`gzip` or `deflate-raw`); refused once the output
 * passes `limit` bytes or the input is not valid.
 */
export async function inflateLimited(
  bytes: Uint8Array,
  format: "gzip" | "deflate-raw",
  limit: number,
  overflow = `it unpacks to more than the size limit of ${limit} bytes`,
): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream()
    .pipeThrough(new DecompressionStream(format));
  try {
    return await collectLimited(stream, limit);
  } catch (error) {
    if (error instanceof RangeError) throw archiveRefused(overflow);
    throw archiveRefused(
      `its ${format === "gzip" ? "gzip" : "deflate"} data is damaged`,
    );
  }
}

/**
 * A bzip2 stream decompressed by the system's `bzip2` (no JavaScript
 * decoder is kept up), stopped at `limit` bytes.
 */
export async function bunzipLimited(
  bytes: Uint8Array,
  limit: number,
): Promise<Uint8Array> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("bzip2", {
      args: ["-dc"],
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
  } catch {
    throw archiveRefused(
      ".tar.bz2 needs the bzip2 program on this machine's PATH, which was not found",
    );
  }
  const writer = child.stdin.getWriter();
  const writing = writer.write(bytes).then(() => writer.close()).catch(
    () => {},
  );
  try {
    const out = await collectLimited(child.stdout, limit);
    await writing;
    const status = await child.status;
    if (!status.success) throw archiveRefused("its bzip2 data is damaged");
    return out;
  } catch (error) {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.status;
    await writing;
    if (error instanceof RangeError) {
      throw archiveRefused(
        `it unpacks to more than the size limit of ${limit} bytes`,
      );
    }
    throw error;
  }
}

async function collectLimited(
  stream: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += chunk.byteLength;
    if (total > limit) throw new RangeError("over the limit");
    chunks.push(chunk);
  }
  const all = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.byteLength;
  }
  return all;
}
