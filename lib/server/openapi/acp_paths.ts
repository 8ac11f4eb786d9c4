/**
 * `/acp` in the OpenAPI document: the ACP remote transport's three methods
 * on one path (`docs/acp-endpoint.md`). The JSON-RPC messages themselves are
 * ACP's, described by its own schema, not here.
 *
 * @module
 */

import { errors, json } from "./paths.ts";

type Schema = Record<string, unknown>;

const MESSAGE: Schema = {
  type: "object",
  description: "One ACP JSON-RPC message (see the ACP schema)",
};

const CONNECTION_ID: Schema = {
  name: "Acp-Connection-Id",
  in: "header",
  required: false,
  description:
    "The connection (the server sets it on initialize's answer); every request but initialize carries it",
  schema: { type: "string" },
};

/** `/acp`: POST, GET (SSE stream or WebSocket upgrade) and DELETE. */
export function acpPaths(): Record<string, Schema> {
  return {
    "/acp": {
      post: {
        operationId: "acpPost",
        summary:
          "ACP over Streamable HTTP: one client message; initialize is answered here, anything else is accepted (202) and answered on the streams. The query sets run-config keys of the connection's target",
        parameters: [CONNECTION_ID],
        requestBody: {
          required: true,
          content: { "application/json": { schema: MESSAGE } },
        },
        responses: {
          "200": json(MESSAGE, "initialize's answer"),
          "202": { description: "Accepted; the answer comes on a stream" },
          ...errors(400, 401, 403, 413, 503),
        },
      },
      get: {
        operationId: "acpStream",
        summary:
          "ACP server messages as an SSE stream (the connection's, or a session's with Acp-Session-Id), or with Upgrade: websocket the whole connection as a WebSocket (101, one message per text frame)",
        parameters: [CONNECTION_ID, {
          name: "Acp-Session-Id",
          in: "header",
          required: false,
          schema: { type: "string" },
        }],
        responses: {
          "200": {
            description: "Server messages, one per SSE event",
            content: {
              "text/event-stream": {
                schema: { type: "string" },
                "x-item-schema": MESSAGE,
              },
            },
          },
          "101": { description: "Switched to a WebSocket" },
          ...errors(400, 401, 403),
        },
      },
      delete: {
        operationId: "acpClose",
        summary: "Ends the connection",
        parameters: [CONNECTION_ID],
        responses: {
          "202": { description: "Closed" },
          ...errors(400, 401),
        },
      },
    },
  };
}
