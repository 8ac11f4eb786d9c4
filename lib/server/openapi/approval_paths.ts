/**
 * The operations of `/openapi.json` for people: the operator console page and
 * the answer to a permission request (`permission-decision=ask`).
 *
 * @module
 */

import { CONSOLE_MODULE_PATH, CONSOLE_MODULES } from "../console_modules.ts";
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
        parameters: [{
          name: "images",
          in: "query",
          description:
            "1: load images from the agent's URLs (the page's img-src allows https:)",
          schema: { type: "string", enum: ["1"] },
        }],
        responses: {
          "200": {
            description: "The console page",
            content: { "text/html": { schema: { type: "string" } } },
          },
        },
      },
    },
    ...consoleFilePaths(),
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

/** The console's static files: its own modules, its two libraries and the icon. */
function consoleFilePaths(): Record<string, Schema> {
  const file = (operationId: string, summary: string, type: string) => ({
    get: {
      operationId,
      summary,
      security: [],
      responses: {
        "200": {
          description: summary,
          content: { [type]: { schema: { type: "string" } } },
        },
      },
    },
  });
  return {
    [`${CONSOLE_MODULE_PATH}{file}`]: {
      get: {
        operationId: "consoleModule",
        summary:
          "A module of the console's own code (main.js is the page's entry; it imports the others)",
        security: [],
        parameters: [{
          name: "file",
          in: "path",
          required: true,
          schema: { type: "string", enum: Object.keys(CONSOLE_MODULES) },
        }],
        responses: {
          "200": {
            description: "The module",
            content: { "text/javascript": { schema: { type: "string" } } },
          },
          ...errors(401, 404),
        },
      },
    },
    "/console/marked.js": file(
      "consoleMarked",
      "The Markdown renderer the console loads (marked, its browser ESM file)",
      "text/javascript",
    ),
    "/console/purify.js": file(
      "consolePurify",
      "The HTML sanitiser the console loads (DOMPurify, its browser ESM file)",
      "text/javascript",
    ),
    "/favicon.ico": file("favicon", "The runner's icon", "image/svg+xml"),
  };
}
