/**
 * A loopback TCP proxy a test puts between a client (a browser) and a
 * server: it can cut every connection it carries, as a network blip, proxy
 * timeout or replica restart does, and hold what the server sends until
 * released, as a stalled network does.
 *
 * @module
 */

/** A running proxy. */
export interface TcpProxy {
  /** `http://127.0.0.1:<port>` of the proxy. */
  url: string;
  /** Connections accepted so far. */
  accepted(): number;
  /** Closes every connection open now; new ones are carried as before. */
  cut(): void;
  /** Holds the server's bytes on every connection until {@linkcode release}. */
  hold(): void;
  /** Passes on what was held and everything after it. */
  release(): void;
  /** Stops listening and closes every connection. */
  close(): Promise<void>;
}

interface Carried {
  client: Deno.TcpConn;
  server: Deno.TcpConn;
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}

/** Starts a proxy on 127.0.0.1 in front of `target` (`http://127.0.0.1:port`). */
export function startTcpProxy(target: string): TcpProxy {
  const port = Number(new URL(target).port);
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const open = new Set<Carried>();
  const pipes: Promise<void>[] = [];
  let accepted = 0;
  let held: PromiseWithResolvers<void> | null = null;
  const pump = async (
    from: Deno.Conn,
    to: Deno.Conn,
    gated: boolean,
  ): Promise<void> => {
    const buffer = new Uint8Array(65536);
    try {
      for (;;) {
        const read = await from.read(buffer);
        if (read === null) break;
        while (gated && held) await held.promise;
        let written = 0;
        while (written < read) {
          written += await to.write(buffer.subarray(written, read));
        }
      }
    } catch { /* cut or reset */ }
  };
  const carry = async (client: Deno.TcpConn) => {
    let server: Deno.TcpConn;
    try {
      server = await Deno.connect({ hostname: "127.0.0.1", port });
    } catch {
      closeQuietly(client);
      return;
    }
    const pair = { client, server };
    open.add(pair);
    await Promise.race([
      pump(client, server, false),
      pump(server, client, true),
    ]);
    open.delete(pair);
    closeQuietly(client);
    closeQuietly(server);
  };
  const accepting = (async () => {
    try {
      for await (const client of listener) {
        accepted++;
        pipes.push(carry(client));
      }
    } catch { /* listener closed */ }
  })();
  const cut = () => {
    for (const pair of open) {
      closeQuietly(pair.client);
      closeQuietly(pair.server);
    }
    open.clear();
  };
  const release = () => {
    held?.resolve();
    held = null;
  };
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    accepted: () => accepted,
    cut,
    hold: () => {
      held ??= Promise.withResolvers<void>();
    },
    release,
    async close() {
      release();
      listener.close();
      cut();
      await accepting;
      await Promise.all(pipes);
    },
  };
}
