/**
 * Raw TCP for tests that must behave like hostile or broken clients: send a
 * request head that never finishes, a `Host` header `fetch` would not send,
 * or a WebSocket frame header announcing more than the hub accepts.
 *
 * @module
 */

/** Connects to `127.0.0.1:port` of a URL. */
export function connectTo(url: string): Promise<Deno.TcpConn> {
  return Deno.connect({
    hostname: "127.0.0.1",
    port: Number(new URL(url).port),
  });
}

/** Writes all of `bytes` (or text). */
export async function writeAll(
  conn: Deno.Conn,
  data: Uint8Array | string,
): Promise<void> {
  const bytes = typeof data === "string"
    ? new TextEncoder().encode(data)
    : data;
  let written = 0;
  while (written < bytes.length) {
    written += await conn.write(bytes.subarray(written));
  }
}

/**
 * Reads until the peer closes (or resets); fails after `deadlineMs` (a safety
 * bound so a server that never answers fails the test instead of hanging it).
 */
export async function readToEnd(
  conn: Deno.Conn,
  deadlineMs = 30_000,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const chunk = new Uint8Array(65536);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    conn.close();
  }, deadlineMs);
  try {
    for (;;) {
      const read = await conn.read(chunk);
      if (read === null) break;
      chunks.push(chunk.slice(0, read));
    }
  } catch (error) {
    if (timedOut) throw new Error(`no answer within ${deadlineMs} ms`);
    if (!(error instanceof Deno.errors.ConnectionReset)) throw error;
  } finally {
    clearTimeout(timer);
  }
  if (!timedOut) {
    try {
      conn.close();
    } catch { /* closed */ }
  }
  const all = new Uint8Array(chunks.reduce((sum, c) => sum + c.length, 0));
  let offset = 0;
  for (const c of chunks) {
    all.set(c, offset);
    offset += c.length;
  }
  return all;
}

/** A raw HTTP answer: status and body (the server closes the connection). */
export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Parses a raw HTTP/1.1 answer without chunked encoding. */
export function parseAnswer(bytes: Uint8Array): RawAnswer {
  const text = new TextDecoder().decode(bytes);
  const end = text.indexOf("\r\n\r\n");
  const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1)
      .trim();
  }
  return {
    status: Number(statusLine.split(" ")[1]),
    headers,
    body: text.slice(end + 4),
  };
}

/** Sends one request with `connection: close` exactly as given and reads the answer. */
export async function rawRequest(
  url: string,
  options: {
    method?: string;
    path?: string;
    headers: Record<string, string>;
    body?: string;
  },
): Promise<RawAnswer> {
  const conn = await connectTo(url);
  const body = options.body ?? "";
  const headers = {
    ...options.headers,
    "content-length": String(new TextEncoder().encode(body).length),
    connection: "close",
  };
  await writeAll(
    conn,
    `${options.method ?? "GET"} ${options.path ?? "/"} HTTP/1.1\r\n` +
      Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`)
        .join("") +
      "\r\n" + body,
  );
  const answer = parseAnswer(await readToEnd(conn));
  if (answer.headers["transfer-encoding"] === "chunked") {
    answer.body = unchunk(answer.body);
  }
  return answer;
}

function unchunk(text: string): string {
  let out = "";
  let rest = text;
  for (;;) {
    const lineEnd = rest.indexOf("\r\n");
    const size = parseInt(rest.slice(0, lineEnd), 16);
    if (!size) return out;
    out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
    rest = rest.slice(lineEnd + 2 + size + 2);
  }
}

/** Half a request head: what a slowloris client sends, and then nothing. */
export const HALF_SENT_HEAD = "GET /v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n";

/**
 * Opens `count` connections that each send `head` (by default half a request
 * head) and then nothing, 100 at a time; a connection the server has already
 * closed is kept too (the burst is the point, not each socket).
 */
export async function openHalfSent(
  url: string,
  count: number,
  head = HALF_SENT_HEAD,
): Promise<Deno.TcpConn[]> {
  const conns: Deno.TcpConn[] = [];
  for (let start = 0; start < count; start += 100) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(100, count - start) }, async () => {
        const conn = await connectTo(url);
        await writeAll(conn, head).catch(() => {});
        return conn;
      }),
    );
    conns.push(...batch);
  }
  return conns;
}

/** Closes every connection (those the server closed already too). */
export function closeAll(conns: Deno.Conn[]): void {
  for (const conn of conns) {
    try {
      conn.close();
    } catch { /* closed */ }
  }
}

/** A sample's value in Prometheus text (`name{labels} value`), or undefined. */
export function metricValue(
  text: string,
  sample: string,
): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

/**
 * Opens a raw TCP connection and completes the WebSocket upgrade of `path`
 * (default `/`) with extra `headers` (fails unless answered 101). The answer
 * head must arrive in one read, with nothing after it.
 */
export async function upgraded(
  url: string,
  options: { path?: string; headers?: Record<string, string> } = {},
): Promise<Deno.TcpConn> {
  const conn = await connectTo(url);
  const extra = Object.entries(options.headers ?? {})
    .map(([name, value]) => `${name}: ${value}\r\n`).join("");
  await writeAll(
    conn,
    `GET ${options.path ?? "/"} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n` +
      `Upgrade: websocket\r\n${extra}` +
      `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
      `Sec-WebSocket-Version: 13\r\n\r\n`,
  );
  const head = new Uint8Array(1024);
  const read = await conn.read(head);
  const answer = new TextDecoder().decode(head.subarray(0, read ?? 0));
  if (!/^HTTP\/1.1 101/.test(answer)) {
    conn.close();
    throw new Error(`the WebSocket upgrade was answered: ${answer}`);
  }
  return conn;
}

/** One masked client frame (payloads under 64 KiB). */
export function clientFrame(first: number, payload: Uint8Array): Uint8Array {
  const mask = [9, 8, 7, 6];
  const head = payload.length > 125
    ? [first, 0x80 | 126, payload.length >> 8, payload.length & 255]
    : [first, 0x80 | payload.length];
  const frame = new Uint8Array(head.length + 4 + payload.length);
  frame.set([...head, ...mask]);
  payload.forEach((byte, i) => frame[head.length + 4 + i] = byte ^ mask[i & 3]);
  return frame;
}
