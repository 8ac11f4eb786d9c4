/**
 * Checks real responses against `/openapi.json`: the status is one the
 * operation lists, the content type one it lists for that status, its
 * required headers are present, and the body (each event or line of a
 * stream) validates against the schema with Ajv (JSON Schema 2020-12).
 *
 * @module
 */

import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

type Json = Record<string, unknown>;

/** How a response body is read. */
export interface CheckOptions {
  /** The body is JSON lines (the n8n stream), each validated by `x-item-schema`. */
  lines?: boolean;
}

/** A checker for one OpenAPI document. */
export interface Contract {
  /**
   * Checks `response` as an answer of `operation` ("POST /v1/runs"); returns
   * its body (parsed JSON, the events of a stream, or text).
   */
  check(
    operation: string,
    response: Response,
    options?: CheckOptions,
  ): Promise<unknown>;
  /** The operations checked so far, with the statuses seen. */
  seen: Map<string, Set<number>>;
}

function pointer(...parts: string[]): string {
  return "openapi#/" +
    parts.map((part) => part.replaceAll("~", "~0").replaceAll("/", "~1"))
      .join("/");
}

/** Splits an SSE body into its messages' data, skipping comments. */
function sseData(text: string): string[] {
  return text.split("\n\n").filter((block) => block.trim()).flatMap(
    (block) => {
      const data = block.split("\n").filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart()).join("\n");
      return data ? [data] : [];
    },
  );
}

/** Makes a {@linkcode Contract} for `document`. */
export function createContract(document: Json): Contract {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  (addFormats as unknown as (ajv: Ajv2020) => void)(ajv);
  ajv.addSchema(document, "openapi");
  const seen = new Map<string, Set<number>>();

  function validate(ref: string, value: unknown, what: string) {
    const valid = ajv.validate({ $ref: ref }, value);
    assert.ok(
      valid,
      `${what} does not match ${ref}: ${ajv.errorsText(ajv.errors)}\n${
        JSON.stringify(value).slice(0, 500)
      }`,
    );
  }

  return {
    seen,
    async check(operation, response, options = {}) {
      const [method, path] = operation.split(" ");
      const paths = document.paths as Record<string, Record<string, Json>>;
      const op = paths[path]?.[method.toLowerCase()];
      assert.ok(op, `${operation} is not in the document`);
      const status = String(response.status);
      const responses = op.responses as Record<string, Json>;
      const declared = responses[status];
      const body = await response.text();
      assert.ok(
        declared,
        `${operation} answered ${status}, which it does not list: ${body}`,
      );
      if (!seen.has(operation)) seen.set(operation, new Set());
      seen.get(operation)!.add(response.status);
      for (
        const [name, spec] of Object.entries(
          (declared.headers ?? {}) as Record<string, Json>,
        )
      ) {
        const resolved = spec.$ref
          ? (document.components as Json).headers as Record<string, Json>
          : undefined;
        const headerSpec = resolved
          ? resolved[String(spec.$ref).split("/").pop()!]
          : spec;
        if (headerSpec.required) {
          assert.ok(
            response.headers.has(name),
            `${operation} ${status} lacks the ${name} header`,
          );
        }
      }
      if (!declared.content) {
        assert.equal(body, "", `${operation} ${status} has a body`);
        return undefined;
      }
      const type = (response.headers.get("content-type") ?? "").split(";")[0]
        .trim();
      const content = declared.content as Record<string, Json>;
      assert.ok(
        content[type],
        `${operation} ${status} answered ${type}, which it does not list`,
      );
      const where = [
        "paths",
        path,
        method.toLowerCase(),
        "responses",
        status,
        "content",
        type,
      ];
      const textual = [
        "text/plain",
        "text/html",
        "text/markdown",
        "text/javascript",
        "image/svg+xml",
      ];
      if (textual.includes(type)) return body;
      const isStream = type === "text/event-stream" ||
        type === "application/x-ndjson" || options.lines;
      if (isStream) {
        assert.ok(
          content[type]["x-item-schema"],
          `${operation}: no item schema`,
        );
        const items = (type === "text/event-stream"
          ? sseData(body)
          : body.split("\n").filter((line) =>
            line.trim()
          ))
          .map((line) => JSON.parse(line));
        for (const item of items) {
          validate(
            pointer(...where, "x-item-schema"),
            item,
            `${operation} item`,
          );
        }
        return items;
      }
      const parsed = JSON.parse(body);
      validate(pointer(...where, "schema"), parsed, `${operation} ${status}`);
      return parsed;
    },
  };
}
