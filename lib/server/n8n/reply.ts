/**
 * The `stream=false` answer of the n8n webhook: one JSON object with the
 * answer under the output key (`--n8n-output-key`), and the shape of one
 * webhook call's answer that the route hands to its streams.
 *
 * @module
 */

import type { Context } from "hono";
import { isTerminalEvent } from "../../events.ts";
import type { ManagedRun } from "../../run/manager.ts";
import type { ServerContext } from "../context.ts";
import { failureText } from "./answers.ts";
import { finalMessage } from "../stream_shape.ts";
import { textStream } from "../stream.ts";

/** How a webhook answer reports a failed run. */
export type N8nErrorFormat = "item" | "json";

/** One webhook call's answer: its run, what goes ahead of it, and what happens if it is not delivered. */
export interface N8nAnswer {
  /** The route context. */
  ctx: ServerContext;
  /** The call's run. */
  run: ManagedRun;
  /** How a failure is reported. */
  errors: N8nErrorFormat;
  /** Earlier answers of the conversation that were not delivered ("" if none). */
  preface: string;
  /** The caller went away before the end: keep the answer for the conversation's next call. */
  undelivered(prefaceSent: boolean): void;
}

/** The headers of every webhook answer. */
export const JSON_HEADERS = {
  "content-type": "application/json; charset=utf-8",
  "cache-control": "no-cache",
};

/**
 * The `stream=false` answer, one JSON object `{<output key>, run_id,
 * usage?}`. By
 * default the status is sent at once, newlines keep the connection alive,
 * and the object follows when the run ends (a failure as readable text
 * under the output key, with `error`). With `?errors=json` the status waits
 * for the run: 200, or 502 with the error body when it failed.
 */
export async function n8nJsonReply(
  c: Context,
  answer: N8nAnswer,
): Promise<Response> {
  const { ctx, run } = answer;
  if (answer.errors === "json") {
    await run.done;
    return c.json(...await n8nDocument(answer));
  }
  let delivered = false;
  const body = textStream(
    async () => {
      if (delivered) return undefined;
      await run.done;
      delivered = true;
      return JSON.stringify((await n8nDocument(answer))[0]);
    },
    () => {
      if (!delivered) answer.undelivered(false);
    },
    { keepalive: "\n", keepaliveMs: ctx.config.keepaliveSeconds * 1000 },
  );
  return new Response(body, {
    headers: { ...JSON_HEADERS, "x-run-id": run.runId },
  });
}

/** The `stream=false` object of an ended run, with the status `?errors=json` gives it. */
async function n8nDocument(
  { ctx, run, errors, preface }: N8nAnswer,
): Promise<[Record<string, unknown>, 200 | 502]> {
  const { store, config } = ctx;
  const events = await store.getEvents(run.runId);
  const record = await store.getRun(run.runId);
  const failed = events.find((event) => event.type === "run.failed");
  const error = record?.status === "completed" ? undefined : {
    code: record?.code ?? "runner.internal",
    message: record?.error ?? "The run failed.",
    retryable: Boolean(failed?.data.retryable),
  };
  if (error && errors === "json") {
    const earlier = preface ? { [config.n8n.outputKey]: preface } : {};
    return [ctx.redact({ error, run_id: run.runId, ...earlier }), 502];
  }
  const text = error
    ? failureText(
      failed ?? { type: "run.failed", run_id: run.runId, data: error },
      ctx.secrets,
    )
    : finalMessage(events);
  // The run's usage, as its terminal event carries it (none: none reported).
  const usage = events.find(isTerminalEvent)?.usage;
  return [
    ctx.redact({
      [config.n8n.outputKey]: preface + text,
      run_id: run.runId,
      ...(error ? { error } : {}),
      ...(usage ? { usage } : {}),
    }),
    200,
  ];
}
