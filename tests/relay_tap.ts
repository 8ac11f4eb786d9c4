/**
 * A WebSocket relay between a real daemon and a real hub that checks every
 * frame crossing it against the `coding-relay-v1` contract (and each run
 * event against LangBot's `RunnerResult`), in both directions. Tests that
 * drive a daemon through `serveWithDaemon` get it for free.
 *
 * @module
 */

import { assertRelayFrame, type RelayDirection } from "./contracts.ts";

/** A running tap. */
export interface RelayTap {
  /** Where the daemon dials instead of the hub. */
  url: string;
  /** Frames checked so far, by direction. */
  checked: Record<RelayDirection, number>;
  /** Every frame's text from the daemon to the hub, in order. */
  fromDaemon: string[];
  /** Contract violations seen (the first one fails {@linkcode RelayTap.assertClean}). */
  violations: string[];
  /** Fails with the first violation, if any. */
  assertClean(): void;
  /** Closes every socket and the listener. */
  close(): Promise<void>;
}

function forwardClose(to: WebSocket, event: CloseEvent): void {
  if (to.readyState !== WebSocket.OPEN) return;
  try {
    to.close(event.code === 1005 ? 1000 : event.code, event.reason);
  } catch {
    to.close(1000, event.reason);
  }
}

/** Starts a tap on 127.0.0.1 that relays to `hubUrl`. */
export function startRelayTap(hubUrl: string): RelayTap {
  const sockets: WebSocket[] = [];
  const violations: string[] = [];
  const fromDaemon: string[] = [];
  const checked: Record<RelayDirection, number> = {
    "daemon->hub": 0,
    "hub->daemon": 0,
  };
  const check = (text: string, direction: RelayDirection) => {
    try {
      assertRelayFrame(text, direction);
      checked[direction] += 1;
    } catch (error) {
      violations.push(error instanceof Error ? error.message : String(error));
    }
  };
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request) => {
      const { socket: daemon, response } = Deno.upgradeWebSocket(request);
      const hub = new WebSocket(hubUrl);
      sockets.push(daemon, hub);
      const hubOpen = new Promise((resolve) =>
        hub.addEventListener("open", resolve, { once: true })
      );
      daemon.addEventListener("message", async (event) => {
        const text = String(event.data);
        fromDaemon.push(text);
        check(text, "daemon->hub");
        await hubOpen;
        if (hub.readyState === WebSocket.OPEN) hub.send(text);
      });
      hub.addEventListener("message", (event) => {
        const text = String(event.data);
        check(text, "hub->daemon");
        if (daemon.readyState === WebSocket.OPEN) daemon.send(text);
      });
      daemon.addEventListener("close", (event) => forwardClose(hub, event));
      hub.addEventListener("close", (event) => forwardClose(daemon, event));
      return response;
    },
  );
  return {
    url: `ws://127.0.0.1:${server.addr.port}`,
    checked,
    fromDaemon,
    violations,
    assertClean() {
      if (violations.length) {
        throw new Error(
          `${violations.length} relay frame(s) broke the contract; the first: ${
            violations[0]
          }`,
        );
      }
    },
    async close() {
      for (const socket of sockets) {
        if (socket.readyState === WebSocket.OPEN) socket.close(1000);
      }
      await server.shutdown();
    },
  };
}
