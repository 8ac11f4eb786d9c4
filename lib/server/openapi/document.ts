/**
 * The OpenAPI 3.1 description of `runner serve`, served at `/openapi.json`:
 * the operations (`paths.ts`, the approval routes in `approval_paths.ts`),
 * the body schemas (`schemas.ts`, the run config's from its one description
 * in `config.ts`), and the shared parameters, headers and security schemes.
 *
 * `server/openapi/` owns the service's self-description and nothing else: it
 * builds the document from data (the route table, the body schemas, the run
 * config's one description) and imports nothing of the routes that serve it;
 * `server/meta.ts` serves it and `tests/server/openapi_test.ts` checks every
 * answer against it.
 *
 * @module
 */

import { transcriptPaths } from "./transcript_paths.ts";
import { RUNNER_VERSION } from "../../version.ts";
import {
  metaPaths,
  n8nPaths,
  operatorPaths,
  runCollectionPaths,
  singleRunPaths,
  warmAgentPaths,
} from "./paths.ts";
import { componentSchemas } from "./schemas.ts";
import { approvalPaths } from "./approval_paths.ts";
import { acpPaths } from "./acp_paths.ts";

type Schema = Record<string, unknown>;

const ID = {
  type: "string",
  pattern: "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
};

function parameters(): Record<string, Schema> {
  return {
    RunId: { name: "id", in: "path", required: true, schema: ID },
    ConversationId: { name: "id", in: "path", required: true, schema: ID },
    Stream: {
      name: "stream",
      in: "query",
      description: "false: answer with one JSON document after the run ends.",
      schema: { type: "boolean" },
    },
    AllContent: {
      name: "all_content",
      in: "query",
      description:
        "true: each message.delta also carries all_content, the message so far, while that is under 64 KiB (docs/events.md). Default: false.",
      schema: { type: "boolean" },
    },
    Completions: {
      name: "completions",
      in: "query",
      description:
        "full (default): message.completed and run.completed carry the whole text. lean: the answer once — a completion whose text its deltas carried leaves it out (message.completed's message is {role}, run.completed has no message). Not with all_content=true.",
      schema: { type: "string", enum: ["full", "lean"], default: "full" },
    },
    After: {
      name: "after",
      in: "query",
      description:
        "Only events with a greater sequence (the larger of this and Last-Event-ID).",
      schema: { type: "integer", minimum: 0 },
    },
    LastEventId: {
      name: "Last-Event-ID",
      in: "header",
      description:
        "The last sequence a reconnecting client saw; nothing up to it is sent again.",
      schema: { type: "integer", minimum: 0 },
    },
    IdempotencyKey: {
      name: "Idempotency-Key",
      in: "header",
      description:
        "Identifies the POST when it has no run_id: a repeat re-attaches to its run (id idem-<32 hex of the key's SHA-256>).",
      schema: { type: "string", minLength: 1, maxLength: 255 },
    },
  };
}

function headers(): Record<string, Schema> {
  return {
    XRunId: {
      description: "The run the response is about.",
      required: true,
      schema: { type: "string" },
    },
    WWWAuthenticate: {
      description:
        'The scheme the runner expected: Bearer, Basic realm="runner" or Header.',
      required: true,
      schema: { type: "string" },
    },
    RetryAfter: {
      description: "Seconds to wait before retrying.",
      schema: { type: "integer" },
    },
  };
}

/** The OpenAPI document of every route. */
export function openApiDocument(): Record<string, unknown> {
  return {
    openapi: "3.1.0",
    info: {
      title: "runner",
      version: RUNNER_VERSION,
      description:
        "Runs ACP coding agents for a control plane. See docs/http-api.md.",
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }],
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "The API token: --api-token, else the one runner serve keeps in DATA_DIR/api-token (runner token --show prints it). Required on loopback too, unless the operator chose --loopback-without-token.",
        },
        n8nBasic: { type: "http", scheme: "basic" },
        n8nHeader: {
          type: "apiKey",
          in: "header",
          name: "X-N8n-Auth",
          description: "The header named by --n8n-auth-header-name.",
        },
      },
      schemas: componentSchemas(),
      parameters: parameters(),
      headers: headers(),
    },
    paths: {
      ...metaPaths(),
      ...runCollectionPaths(),
      ...singleRunPaths(),
      ...operatorPaths(),
      ...warmAgentPaths(),
      ...n8nPaths(),
      ...approvalPaths(),
      ...acpPaths(),
      ...transcriptPaths(),
    },
  };
}
