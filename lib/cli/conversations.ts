/**
 * `runner conversations list|show|export|import`: the conversations of the
 * local store (`<data-dir>/runner.db`) for a person at a terminal, read as
 * Markdown, exported as `runner-transcript` JSON and imported from one
 * (`docs/transcripts.md`).
 *
 * @module
 */

import { parseFlags, reportFailure, reportUsageError } from "./args.ts";
import { RunnerError } from "../errors.ts";
import { defaultDataDir, openStore } from "../store/open.ts";
import type { RunRecord, RunStore } from "../store/types.ts";
import {
  conversationTranscript,
  importTranscript,
  runTranscript,
  type Transcript,
} from "../store/transcript.ts";
import { transcriptMarkdown } from "../store/transcript_markdown.ts";

const HELP =
  `Usage: runner conversations list [--limit N] [--json] [--data-dir DIR]
       runner conversations show ID [--run] [--data-dir DIR]
       runner conversations export ID [--run] [--output FILE] [--data-dir DIR]
       runner conversations import FILE|- [--data-dir DIR]

list     conversations of the newest runs (--limit runs, default 200):
         id, runs, last status, last run's time
show     the conversation's transcript as Markdown (prompts, answers, tool
         calls, plans, permission decisions, usage); --run: ID is a run id
export   the transcript as runner-transcript JSON, to stdout or --output
import   stores an exported transcript's runs in this store, all or nothing;
         a file that is no runner-transcript v1, or whose runs are already
         stored, is refused and nothing changes

Exit codes: 0 done, 1 not found or refused by the store, 2 bad invocation or
an invalid transcript. See docs/transcripts.md.
`;

const ACTIONS: Record<string, number> = {
  list: 0,
  show: 1,
  export: 1,
  import: 1,
};

/** Runs `runner conversations …`; returns the exit code. */
export async function conversationsCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags({
      args,
      allowPositionals: true,
      options: {
        "data-dir": { type: "string" },
        limit: { type: "string" },
        json: { type: "boolean" },
        run: { type: "boolean" },
        output: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    return reportUsageError(error, "conversations");
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const [action, ...rest] = positionals;
  const usage = usageProblem(action, rest, values.limit);
  if (usage) {
    return reportUsageError(
      new RunnerError("config.invalid", usage),
      "conversations",
    );
  }
  const store = await openStore({
    dataDir: values["data-dir"] ?? defaultDataDir(),
  });
  try {
    if (action === "list") {
      return await list(store, Number(values.limit ?? 200), values.json);
    }
    if (action === "import") return await importFile(store, rest[0]);
    const transcript = await readTranscript(store, rest[0], values.run);
    const text = action === "show"
      ? transcriptMarkdown(transcript)
      : JSON.stringify(transcript, null, 2) + "\n";
    if (action === "export" && values.output) {
      await Deno.writeTextFile(values.output, text);
    } else {
      await writeOut(text);
    }
    return 0;
  } catch (error) {
    const invalid = error instanceof RunnerError &&
      error.code === "http.bad_request";
    return reportFailure(error, invalid ? 2 : 1);
  } finally {
    await store.close();
  }
}

/** What is wrong with the action and its arguments, if anything. */
function usageProblem(
  action: string | undefined,
  rest: string[],
  limit: string | undefined,
): string | undefined {
  if (!action) return "give an action: list, show ID, export ID or import FILE";
  const wanted = ACTIONS[action];
  if (wanted === undefined) {
    return `unknown action "${action}" (list, show, export or import)`;
  }
  if (rest.length !== wanted) {
    return wanted
      ? `${action} takes exactly one ${action === "import" ? "FILE" : "ID"}`
      : `${action} takes no arguments (got "${rest[0]}")`;
  }
  if (limit !== undefined && !/^[1-9][0-9]{0,5}$/.test(limit)) {
    return `--limit must be a whole number from 1 to 999999, not "${limit}"`;
  }
  return undefined;
}

async function writeOut(text: string): Promise<void> {
  const bytes = new TextEncoder().encode(text);
  let written = 0;
  while (written < bytes.length) {
    written += await Deno.stdout.write(bytes.subarray(written));
  }
}

async function readTranscript(
  store: RunStore,
  id: string,
  isRun: boolean | undefined,
): Promise<Transcript> {
  const transcript = isRun
    ? await runTranscript(store, id)
    : await conversationTranscript(store, id);
  if (transcript) return transcript;
  throw new RunnerError(
    "http.not_found",
    isRun
      ? `No run ${id} in this store; runner conversations list shows what is stored.`
      : `Conversation ${id} has no runs in this store; runner conversations list shows what is stored (a run id needs --run).`,
  );
}

async function list(
  store: RunStore,
  limit: number,
  json: boolean | undefined,
): Promise<number> {
  const runs = await store.listRuns({ limit });
  const rows = new Map<string, { runs: number; last: RunRecord }>();
  for (const run of runs) {
    if (!run.conversationId) continue;
    const row = rows.get(run.conversationId);
    if (row) row.runs += 1;
    else rows.set(run.conversationId, { runs: 1, last: run });
  }
  const view = [...rows].map(([id, { runs, last }]) => ({
    conversation_id: id,
    runs,
    last_status: last.status,
    last_run_at: new Date(last.createdAt).toISOString(),
  }));
  if (json) {
    await writeOut(JSON.stringify(view, null, 2) + "\n");
    return 0;
  }
  if (!view.length) {
    console.log("No conversations among the stored runs.");
    return 0;
  }
  const width = Math.max(15, ...view.map((row) => row.conversation_id.length));
  console.log(`${"CONVERSATION".padEnd(width)}  RUNS  LAST STATUS  LAST RUN`);
  for (const row of view) {
    console.log(
      `${row.conversation_id.padEnd(width)}  ${String(row.runs).padStart(4)}  ${
        row.last_status.padEnd(11)
      }  ${row.last_run_at}`,
    );
  }
  return 0;
}

async function importFile(store: RunStore, file: string): Promise<number> {
  let text: string;
  try {
    text = file === "-"
      ? await new Response(Deno.stdin.readable).text()
      : await Deno.readTextFile(file);
  } catch (error) {
    throw new RunnerError(
      "http.bad_request",
      `Could not read ${file}: ${
        error instanceof Error ? error.message : String(error)
      }.`,
    );
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch {
    throw new RunnerError(
      "http.bad_request",
      `${file} is not JSON; give a file runner conversations export wrote.`,
    );
  }
  const imported = await importTranscript(store, document);
  console.log(
    `Imported ${imported.runIds.length} run(s) with ${imported.events} event(s)${
      imported.conversationId
        ? ` of conversation ${imported.conversationId}`
        : ""
    }.`,
  );
  return 0;
}
