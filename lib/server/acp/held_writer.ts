/**
 * The SDK's JSON-RPC connection takes a writer of its stream, writes one
 * message and releases the lock, for every message it sends. In Deno each
 * release makes an Error and two rejected promises, which on an `/acp`
 * stream of many small `session/update`s was about half of the server's CPU
 * (`docs/acp-endpoint.md`, "Cost"). So the runner agent's connection gets a
 * stream whose writer is taken once, on the first message, and kept for the
 * connection's life; the messages, their order and their backpressure are
 * the same.
 *
 * @module
 */

import type { HandleRequestOptions } from "@agentclientprotocol/sdk/experimental/server";

/** What `AcpServer` connects to each accepted connection. */
export type AgentConnector = ReturnType<
  NonNullable<HandleRequestOptions["createAgent"]>
>;

/** `agent`, connected to its streams through a writer held for the connection's life. */
export function withHeldWriter(agent: AgentConnector): AgentConnector {
  return {
    connect: (stream, options) =>
      agent.connect({
        readable: stream.readable,
        writable: heldWritable(stream.writable),
      }, options),
  };
}

/**
 * A stand-in for `writable` whose `getWriter()` always answers one writer
 * that writes through a lock taken once; releasing it does nothing.
 */
function heldWritable<T>(writable: WritableStream<T>): WritableStream<T> {
  let writer: WritableStreamDefaultWriter<T> | undefined;
  const held = {
    write: (chunk: T) => (writer ??= writable.getWriter()).write(chunk),
    releaseLock: () => {},
  };
  // The SDK's connection uses nothing of its writable but these two.
  return { getWriter: () => held } as unknown as WritableStream<T>;
}
