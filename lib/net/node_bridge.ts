/**
 * Serving a fetch-style handler (`Request` → `Response`, e.g. a Hono app)
 * through a `node:http` server: the request becomes a `Request` whose signal
 * aborts when the client goes away, and the response body is written with
 * backpressure (a reader that does not read stops the producer instead of
 * growing a buffer) and cancelled when the client disconnects.
 *
 * @module
 */

import type { IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";

/** A fetch-style request handler. */
export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** Options for {@linkcode bridgeRequest}. */
export interface BridgeOptions {
  /** Answers the request. */
  handler: FetchHandler;
  /** The origin used for request URLs (`http://127.0.0.1:8080`). */
  origin: string;
  /** Called when answering fails in a way the handler did not answer. */
  onError: (error: unknown) => void;
  /** The response for a handler that threw. */
  errorResponse: () => Response;
}

/** The `Request` for a node request (body streamed, signal tied to the client). */
export function toRequest(
  incoming: IncomingMessage,
  origin: string,
  signal: AbortSignal,
): Request {
  const headers = new Headers();
  const raw = incoming.rawHeaders;
  for (let index = 0; index + 1 < raw.length; index += 2) {
    try {
      headers.append(raw[index], raw[index + 1]);
    } catch { /* a header value fetch cannot hold: dropped */ }
  }
  const method = incoming.method ?? "GET";
  const hasBody = method !== "GET" && method !== "HEAD" &&
    (incoming.headers["transfer-encoding"] !== undefined ||
      Number(incoming.headers["content-length"] ?? 0) > 0);
  return new Request(new URL(incoming.url ?? "/", origin), {
    method,
    headers,
    signal,
    body: hasBody
      ? Readable.toWeb(incoming) as unknown as ReadableStream<Uint8Array>
      : undefined,
    // @ts-ignore: `duplex` is required for a streamed request body.
    duplex: "half",
  });
}

/** Resolves when `outgoing` can take more data or has closed. */
function drained(outgoing: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      outgoing.off("drain", done);
      outgoing.off("close", done);
      resolve();
    };
    outgoing.on("drain", done);
    outgoing.on("close", done);
  });
}

/** Writes a response to `outgoing`, with backpressure, until done or the client leaves. */
export async function writeResponse(
  response: Response,
  outgoing: ServerResponse,
): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    if (name !== "set-cookie") headers[name] = value;
  });
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers["set-cookie"] = cookies;
  // A request body the handler did not read ends the connection after this
  // answer (see bridgeRequest): say so, or the client may reuse it.
  if (outgoing.req && !outgoing.req.complete) headers.connection = "close";
  outgoing.writeHead(response.status, response.statusText, headers);
  if (!response.body) {
    outgoing.end();
    return;
  }
  // An event stream may stay silent for a while (the ACP SDK's session
  // streams do): its client waits for the head, so send it now.
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
    outgoing.flushHeaders();
  }
  const reader = response.body.getReader();
  const onClose = () => reader.cancel().catch(() => {});
  outgoing.once("close", onClose);
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (outgoing.destroyed) return;
      if (!outgoing.write(value)) await drained(outgoing);
    }
    outgoing.end();
  } finally {
    outgoing.off("close", onClose);
    if (!outgoing.writableEnded) reader.cancel().catch(() => {});
  }
}

/** Answers one node request with the fetch handler; never rejects. */
export async function bridgeRequest(
  incoming: IncomingMessage,
  outgoing: ServerResponse,
  options: BridgeOptions,
): Promise<void> {
  const client = new AbortController();
  // A client that leaves before the answer is complete aborts the request.
  outgoing.once("close", () => {
    if (!outgoing.writableFinished) client.abort();
  });
  incoming.on("error", () => client.abort());
  let response: Response;
  try {
    response = await options.handler(
      toRequest(incoming, options.origin, client.signal),
    );
  } catch (error) {
    options.onError(error);
    response = options.errorResponse();
  }
  try {
    await writeResponse(response, outgoing);
  } catch (error) {
    if (!outgoing.destroyed) options.onError(error);
    outgoing.destroy();
  }
  // A body the handler never read keeps the connection busy: end it instead.
  if (!incoming.complete) incoming.socket?.end();
}
