/**
 * The request body limit of `/v1` (`--max-body-mb`). Unlike `hono/body-limit`
 * it never copies the request (which reads `request.signal` and makes Deno
 * print a plain-text warning into the JSON log).
 *
 * @module
 */

import type { MiddlewareHandler } from "hono";

/**
 * Refuses bodies over `maxBytes` with `onTooLarge()`: at once when
 * `Content-Length` says so, else while reading a chunked body, which is then
 * handed on in memory.
 */
export function limitBody(
  maxBytes: number,
  onTooLarge: () => Response,
): MiddlewareHandler {
  return async (c, next) => {
    const raw = c.req.raw;
    if (!raw.body) return await next();
    const length = raw.headers.get("content-length");
    if (length !== null && !raw.headers.has("transfer-encoding")) {
      if (Number(length) > maxBytes) return onTooLarge();
      return await next();
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of raw.body) {
      size += chunk.length;
      if (size > maxBytes) return onTooLarge();
      chunks.push(chunk);
    }
    const body = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      body.set(chunk, offset);
      offset += chunk.length;
    }
    // A new Request from the URL, method and headers: `new Request(raw)`
    // would read raw.signal.
    c.req.raw = new Request(raw.url, {
      method: raw.method,
      headers: raw.headers,
      body,
    });
    return await next();
  };
}
