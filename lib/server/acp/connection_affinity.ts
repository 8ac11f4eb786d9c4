/**
 * `/acp` connections in a fleet. A Streamable HTTP connection lives in the
 * memory of the replica that answered its `initialize`, but a load balancer
 * sends each of its POSTs and SSE GETs wherever it likes. So a fleet replica
 * hands out connection ids that name it (`<uuid>.<replica id in hex>`), and a
 * replica that receives a request for another's connection forwards it there
 * (with the fleet's forwarding: cluster token, streams passed back as they
 * come). No sticky routing or client cookie is needed. A WebSocket is one
 * TCP connection and stays where it was accepted. See `docs/acp-endpoint.md`
 * ("In a fleet").
 *
 * @module
 */

import type { Context } from "hono";
import { RunnerError } from "../../errors.ts";
import type { FleetRouter } from "../fleet_router.ts";

/** The ACP transport's connection header. */
const CONNECTION_HEADER = "acp-connection-id";

function toHex(text: string): string {
  return [...new TextEncoder().encode(text)]
    .map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

function fromHex(hex: string): string | undefined {
  if (!/^(?:[0-9a-f]{2})+$/.test(hex)) return undefined;
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) {
    bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** The connection id a client sees: the transport's, naming replica `replicaId`. */
export function tagConnectionId(
  connectionId: string,
  replicaId: string,
): string {
  return `${connectionId}.${toHex(replicaId)}`;
}

/** The transport's id and the replica named in a connection id a client sent; undefined: not one of ours. */
export function parseConnectionId(
  tagged: string,
): { connectionId: string; replicaId: string } | undefined {
  const dot = tagged.lastIndexOf(".");
  if (dot <= 0) return undefined;
  const replicaId = fromHex(tagged.slice(dot + 1));
  return replicaId === undefined
    ? undefined
    : { connectionId: tagged.slice(0, dot), replicaId };
}

/** What {@linkcode routeAcpRequest} decided. */
export type AcpRoute =
  | { kind: "forwarded"; response: Response }
  | { kind: "here"; request: Request };

/**
 * Routes one `/acp` request in a fleet: forwarded to the live replica its
 * connection id names, or the request to serve here with the transport's
 * own connection id. A connection whose replica is gone is unknown
 * (`http.not_found`): the client reconnects and loads its session.
 */
export async function routeAcpRequest(
  c: Context,
  fleet: FleetRouter,
): Promise<AcpRoute> {
  const request = c.req.raw;
  const sent = request.headers.get(CONNECTION_HEADER);
  if (!sent) return { kind: "here", request };
  const parsed = parseConnectionId(sent);
  const here = fleet.fleet.replicaId;
  if (parsed && parsed.replicaId !== here) {
    const forwarded = await fleet.toReplica(c, parsed.replicaId);
    if (forwarded) return { kind: "forwarded", response: forwarded };
    if (!fleet.isForwarded(c)) {
      throw new RunnerError(
        "http.not_found",
        `ACP connection ${sent} was held by replica ${parsed.replicaId}, which is gone; open a new connection and load the session (session/load).`,
      );
    }
  }
  if (!parsed || parsed.replicaId !== here) return { kind: "here", request };
  // In place: a copy of the request would read its signal (see body_limit.ts).
  request.headers.set(CONNECTION_HEADER, parsed.connectionId);
  return { kind: "here", request };
}

/** The transport's answer with its connection id (if any) naming this replica. */
export function tagResponse(response: Response, replicaId: string): Response {
  const connectionId = response.headers.get(CONNECTION_HEADER);
  if (!connectionId) return response;
  const headers = new Headers(response.headers);
  headers.set(CONNECTION_HEADER, tagConnectionId(connectionId, replicaId));
  return new Response(response.body, { status: response.status, headers });
}
