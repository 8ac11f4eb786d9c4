/**
 * Transcripts over HTTP: `GET /v1/conversations/:id/transcript` and
 * `GET /v1/runs/:id/transcript` (Markdown, or `?format=json` for the
 * `runner-transcript` document) and `POST /v1/conversations/import`, which
 * stores such a document's runs here (`docs/transcripts.md`).
 *
 * @module
 */

import type { Context, Hono } from "hono";
import { RunnerError } from "../errors.ts";
import {
  conversationTranscript,
  importTranscript,
  runTranscript,
  type Transcript,
} from "../store/transcript.ts";
import { transcriptMarkdown } from "../store/transcript_markdown.ts";
import { readJsonObject, type ServerContext } from "./context.ts";
import { optionalId } from "./run_fields.ts";

/** `md` (the default) or `json`, from `?format=`. */
function transcriptFormat(c: Context): "md" | "json" {
  const format = c.req.query("format") ?? "md";
  if (format === "md" || format === "json") return format;
  throw new RunnerError(
    "http.bad_request",
    `format must be md or json, not ${JSON.stringify(format)}.`,
  );
}

/** A file name made of an id's safe characters. */
function fileName(name: string, format: "md" | "json"): string {
  return `${name.replace(/[^A-Za-z0-9._-]/g, "_")}.transcript.${format}`;
}

function answer(
  c: Context,
  ctx: ServerContext,
  transcript: Transcript,
  name: string,
): Response {
  const format = transcriptFormat(c);
  // Events are stored redacted; this also covers anything added since.
  const redacted = ctx.redact(transcript);
  const disposition = `attachment; filename="${fileName(name, format)}"`;
  if (format === "json") {
    return c.json(redacted, 200, { "content-disposition": disposition });
  }
  return c.body(transcriptMarkdown(redacted), 200, {
    "content-type": "text/markdown; charset=utf-8",
    "content-disposition": disposition,
  });
}

/** Adds the transcript routes. */
export function registerTranscriptRoutes(
  app: Hono,
  ctx: ServerContext,
): void {
  app.get("/v1/conversations/:id/transcript", async (c) => {
    const conversationId = optionalId(c.req.param("id"), "conversation id")!;
    transcriptFormat(c);
    const transcript = await conversationTranscript(ctx.store, conversationId);
    if (!transcript) {
      throw new RunnerError(
        "http.not_found",
        `Conversation ${conversationId} has no stored runs. GET /v1/runs lists recent runs.`,
      );
    }
    return answer(c, ctx, transcript, conversationId);
  });

  app.get("/v1/runs/:id/transcript", async (c) => {
    const runId = optionalId(c.req.param("id"), "run id")!;
    transcriptFormat(c);
    const transcript = await runTranscript(ctx.store, runId);
    if (!transcript) {
      throw new RunnerError(
        "http.not_found",
        `No run ${runId}. GET /v1/runs lists recent runs.`,
      );
    }
    return answer(c, ctx, transcript, runId);
  });

  app.post("/v1/conversations/import", async (c) => {
    const imported = await importTranscript(
      ctx.store,
      await readJsonObject(c),
    );
    ctx.log({
      msg: "transcript imported",
      conversation_id: imported.conversationId,
      runs: imported.runIds.length,
    });
    return c.json({
      conversation_id: imported.conversationId,
      run_ids: imported.runIds,
      events: imported.events,
    }, 201);
  });
}
