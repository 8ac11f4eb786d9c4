/**
 * The operations of `/openapi.json` for people: the operator console page and
 * the answer to a permission request (`permission-decision=ask`).
 *
 * @module
 */

import { errors, json } from "./paths.ts";
import { ref } from "./schemas.ts";

type Schema = Record<string, unknown>;

const DECISIONS = [
  "allow_once",
  "allow_always",
  "reject_once",
  "reject_always",
];

/** `GET /` and `POST /v1/runs/{id}/permissions/{request_id}`. */
export function approvalPaths(): Record<string, Schema> {
  return {
    "/": {
      get: {
        operationId: "console",
        summary:
          "The operator console (an HTML page; its data comes from /v1 with the same auth)",
        security: [],
        responses: {
          "200": {
            description: "The console page",
            content: { "text/html": { schema: { type: "string" } } },
          },
        },
      },
    },
    "/v1/runs/{id}/permissions/{request_id}": {
      post: {
        operationId: "answerPermission",
        summary:
          "Answer a permission request of a run (permission-decision=ask)",
        parameters: [
          { $ref: "#/components/parameters/RunId" },
          {
            name: "request_id",
            in: "path",
            required: true,
            schema: { type: "string" },
          },
        ],
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: {
                  option_id: { type: "string" },
                  decision: { type: "string", enum: DECISIONS },
                },
              },
            },
          },
        },
        responses: {
          "200": json(ref("PermissionAnswered"), "Answered"),
          ...errors(400, 401, 404, 409, 413),
        },
      },
    },
  };
}
