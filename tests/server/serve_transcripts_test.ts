/**
 * Transcripts through a real `runner serve`: a conversation's runs read as
 * Markdown (prompts, answers, tool calls with their outcome, plans,
 * permission decisions, usage; the run's secrets redacted) and as
 * `runner-transcript` JSON; exported from one runner and imported into a
 * fresh one, the same transcript; a corrupt, foreign or conflicting import
 * refused with nothing changed.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  type ServeProcess,
  sseEvents,
  startServe,
  tempDir,
  withServe,
} from "../serve_test_helpers.ts";

const TOKEN = "transcript-api-token-0123456789abcdef";
const ENV_SECRET = "s3cr3t-transcript-value-9f8e7d";
/** A first prompt far past the start a run listing shows, a secret in it. */
const LONG_PROMPT = `first ${ENV_SECRET} ${"and more words ".repeat(60)}` +
  `(the end of the first prompt, with ${ENV_SECRET} again)`;
const LONG_PROMPT_REDACTED = LONG_PROMPT.replaceAll(ENV_SECRET, "[REDACTED]");

const serveArgs = [
  "--allow-custom-commands",
  "--allow-env-names",
  "AGENT_SECRET",
  "--api-token",
  TOKEN,
];

async function transcript(
  serve: ServeProcess,
  path: string,
  format: "md" | "json",
): Promise<string> {
  const response = await apiFetch(`${serve.url}${path}?format=${format}`);
  assert.equal(response.status, 200, await response.clone().text());
  assert.match(
    response.headers.get("content-type") ?? "",
    format === "md" ? /^text\/markdown/ : /^application\/json/,
  );
  assert.match(
    response.headers.get("content-disposition") ?? "",
    /^attachment; filename="[A-Za-z0-9._-]+\.transcript\.(md|json)"$/,
  );
  return await response.text();
}

/** The Markdown without its one line that names when it was exported. */
function withoutExportTime(markdown: string): string {
  return markdown.replace(/, exported [^\n]+\./, ".");
}

async function runTwoTurns(serve: ServeProcess, dir: string): Promise<void> {
  const config = {
    ...fixtureConfig(join(dir, "ws"), [
      "--rich-updates",
      "--permission",
      "--usage",
      "turn",
    ]),
    "env-json": { AGENT_SECRET: ENV_SECRET },
  };
  for (
    const [runId, text] of [["t-run-1", LONG_PROMPT], [
      "t-run-2",
      "second question",
    ]]
  ) {
    const events = await sseEvents(
      await postJson(`${serve.url}/v1/runs`, {
        run_id: runId,
        conversation_id: "conv-t",
        input: { text },
        config,
      }),
    );
    assert.equal(events.at(-1)!.type, "run.completed");
  }
}

async function postImport(serve: ServeProcess, body: unknown) {
  const response = await postJson(
    `${serve.url}/v1/conversations/import`,
    body,
  );
  return { status: response.status, body: await response.json() };
}

async function storedRunIds(serve: ServeProcess): Promise<string[]> {
  const listing = await (await apiFetch(`${serve.url}/v1/runs?limit=100`))
    .json();
  return listing.runs.map((run: { run_id: string }) => run.run_id).sort();
}

Deno.test("a conversation's transcript: Markdown a person reads, JSON that moves it to a fresh runner intact", async () => {
  await withServe({ args: serveArgs }, async (source, dir) => {
    await runTwoTurns(source, dir);
    const markdown = await transcript(
      source,
      "/v1/conversations/conv-t/transcript",
      "md",
    );
    assert.match(markdown, /^# Conversation conv-t$/m);
    assert.match(markdown, /^## Run t-run-1 — completed$/m);
    assert.match(markdown, /\*\*Prompt\*\* \(turn 1\)\n\n> first \[REDACTED\]/);
    assert.match(markdown, /> second question/);
    assert.match(
      markdown,
      /\*\*Agent\*\*\n\n[^*]*echo: second question \(turn 2\)/,
    );
    assert.match(markdown, /\*\*Tool call\*\* `Read README` — completed/);
    assert.match(markdown, /"path": "README\.md"/);
    assert.match(
      markdown,
      /\*\*Plan\*\*\n\n- \[x\] Read README\n- \[ \] Write reply \(in_progress\)/,
    );
    assert.match(
      markdown,
      /\*\*Permission\*\* `[^`]+`: allow_once \(by policy/,
    );
    assert.match(markdown, /^Usage: prompt_tokens 100, completion_tokens 20/m);
    assert.ok(
      markdown.includes(`> ${LONG_PROMPT_REDACTED}\n`),
      "the whole first prompt, redacted",
    );
    assert.ok(!markdown.includes(ENV_SECRET), "the secret is redacted");
    assert.ok(!markdown.includes(TOKEN), "the API token is not in it");

    const runMarkdown = await transcript(
      source,
      "/v1/runs/t-run-2/transcript",
      "md",
    );
    assert.match(runMarkdown, /> second question/);
    assert.ok(!runMarkdown.includes("t-run-1"), "only the run asked for");

    const exported = JSON.parse(
      await transcript(source, "/v1/conversations/conv-t/transcript", "json"),
    );
    assert.equal(exported.format, "runner-transcript");
    assert.equal(exported.version, 1);
    assert.deepEqual(
      exported.runs.map((run: { run_id: string }) => run.run_id),
      ["t-run-1", "t-run-2"],
    );
    assert.ok(!JSON.stringify(exported).includes(ENV_SECRET));
    assert.equal(exported.runs[0].prompt, LONG_PROMPT_REDACTED);
    // The run itself shows the start of it.
    const run = await (await apiFetch(`${source.url}/v1/runs/t-run-1`)).json();
    assert.equal(run.prompt, [...LONG_PROMPT_REDACTED].slice(0, 200).join(""));

    const target = await startServe({
      dataDir: join(await tempDir(), "data"),
      args: serveArgs,
    });
    try {
      const imported = await postImport(target, exported);
      assert.equal(imported.status, 201, JSON.stringify(imported.body));
      assert.deepEqual(imported.body.run_ids, ["t-run-1", "t-run-2"]);
      const again = JSON.parse(
        await transcript(target, "/v1/conversations/conv-t/transcript", "json"),
      );
      assert.deepEqual(again.runs, exported.runs);
      assert.deepEqual(again.conversation, exported.conversation);
      assert.equal(
        withoutExportTime(
          await transcript(target, "/v1/conversations/conv-t/transcript", "md"),
        ),
        withoutExportTime(markdown),
      );
      // The conversation's totals add the imported runs' usage up.
      const conversation = await (await apiFetch(
        `${target.url}/v1/conversations/conv-t`,
      )).json();
      assert.equal(conversation.runs, 2);
      assert.equal(conversation.usage.prompt_tokens, 200);
    } finally {
      await target.stop("SIGTERM");
    }
  });
});

Deno.test("a corrupt, foreign or conflicting import is refused and changes nothing", async () => {
  await withServe({ args: serveArgs }, async (serve, dir) => {
    await runTwoTurns(serve, dir);
    const exported = JSON.parse(
      await transcript(serve, "/v1/conversations/conv-t/transcript", "json"),
    );
    const before = await storedRunIds(serve);
    const renamed = (runId: string) => ({
      ...exported.runs[0],
      run_id: runId,
      events: exported.runs[0].events.map((event: object) => ({
        ...event,
        run_id: runId,
      })),
    });

    // One run is new, one is stored already: neither is written.
    const conflicting = await postImport(serve, {
      ...exported,
      runs: [renamed("t-new-1"), exported.runs[1]],
    });
    assert.equal(conflicting.status, 409);
    assert.equal(conflicting.body.error.code, "http.conflict");
    assert.match(conflicting.body.error.message, /t-run-2 is already stored/);

    const refused: Array<[unknown, RegExp]> = [
      [{ ...exported, format: "other-tool" }, /not a runner-transcript/],
      [{ ...exported, version: 2 }, /version 2 is not one this runner reads/],
      // The first run is valid; the second's events are out of order.
      [{
        ...exported,
        runs: [renamed("t-new-2"), {
          ...renamed("t-new-3"),
          events: [...renamed("t-new-3").events].reverse(),
        }],
      }, /runs\[1\]\.events\[1\]\.sequence/],
      [
        { ...exported, runs: [{ ...renamed("t-new-4"), status: "active" }] },
        /had not ended/,
      ],
      [
        {
          ...exported,
          runs: [{ ...renamed("t-new-5"), conversation_id: "x" }],
        },
        /another conversation/,
      ],
    ];
    for (const [body, message] of refused) {
      const answer = await postImport(serve, body);
      assert.equal(answer.status, 400, JSON.stringify(answer.body));
      assert.equal(answer.body.error.code, "http.bad_request");
      assert.match(answer.body.error.message, message);
    }
    const corrupt = await apiFetch(`${serve.url}/v1/conversations/import`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(exported).slice(0, 200),
    });
    assert.equal(corrupt.status, 400);
    assert.equal((await corrupt.json()).error.code, "http.bad_request");

    assert.deepEqual(await storedRunIds(serve), before, "nothing was stored");
    const unknown = await apiFetch(
      `${serve.url}/v1/conversations/conv-t/transcript?format=xml`,
    );
    assert.equal(unknown.status, 400);
    const missing = await apiFetch(
      `${serve.url}/v1/conversations/nobody/transcript`,
    );
    assert.equal(missing.status, 404);
    const anonymous = await fetch(
      `${serve.url}/v1/conversations/conv-t/transcript`,
    );
    assert.equal(anonymous.status, 401, "the transcript needs the token");
    await anonymous.body?.cancel();
  });
});
