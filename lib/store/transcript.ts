/**
 * Transcripts: a conversation's (or one run's) stored runs and events as the
 * versioned JSON document `runner-transcript` v1 (`docs/transcripts.md`),
 * read back and checked before another runner's store imports it.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";
import { type RunEvent, usageFrom } from "../events.ts";
import type {
  FinalRunStatus,
  ImportedRun,
  RunRecord,
  RunStore,
} from "./types.ts";
import { conversationRuns, totalUsage } from "./usage_totals.ts";

/** The `format` of a transcript document. */
export const TRANSCRIPT_FORMAT = "runner-transcript";
/** The one `version` this runner writes and reads. */
export const TRANSCRIPT_VERSION = 1;

/** One run in a transcript. */
export interface TranscriptRun {
  /** The run id. */
  run_id: string;
  /** The run's conversation, or null. */
  conversation_id: string | null;
  /** Its status when exported. */
  status: string;
  /** Its secret-free config. */
  config: Record<string, unknown>;
  /** Its first input's text, whole (secret-free), or null. */
  prompt: string | null;
  /** The failure code, or null. */
  code: string | null;
  /** The failure message, or null. */
  error: string | null;
  /** ISO 8601 times. */
  created_at: string;
  /** ISO 8601. */
  updated_at: string;
  /** ISO 8601, or null while active. */
  finished_at: string | null;
  /** What the agent reported, or null. */
  usage: Record<string, unknown> | null;
  /** The run's stored events, by sequence. */
  events: RunEvent[];
}

/** A `runner-transcript` v1 document. */
export interface Transcript {
  /** Always {@linkcode TRANSCRIPT_FORMAT}. */
  format: typeof TRANSCRIPT_FORMAT;
  /** Always {@linkcode TRANSCRIPT_VERSION}. */
  version: typeof TRANSCRIPT_VERSION;
  /** When it was written, ISO 8601. */
  exported_at: string;
  /** The conversation, with its runs' usage added up. */
  conversation: { conversation_id: string | null; usage: unknown };
  /** Its runs, oldest first. */
  runs: TranscriptRun[];
}

function iso(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

function transcriptRun(record: RunRecord, events: RunEvent[]): TranscriptRun {
  return {
    run_id: record.runId,
    conversation_id: record.conversationId ?? null,
    status: record.status,
    config: record.config,
    prompt: record.prompt ?? null,
    code: record.code ?? null,
    error: record.error ?? null,
    created_at: iso(record.createdAt)!,
    updated_at: iso(record.updatedAt)!,
    finished_at: iso(record.finishedAt),
    usage: record.usage ? { ...record.usage } : null,
    events,
  };
}

function document(
  conversationId: string | null,
  records: RunRecord[],
  runs: TranscriptRun[],
): Transcript {
  return {
    format: TRANSCRIPT_FORMAT,
    version: TRANSCRIPT_VERSION,
    exported_at: new Date().toISOString(),
    conversation: {
      conversation_id: conversationId,
      usage: totalUsage(records) ?? null,
    },
    runs,
  };
}

/** A conversation's transcript, its runs oldest first; undefined when it has none. */
export async function conversationTranscript(
  store: RunStore,
  conversationId: string,
): Promise<Transcript | undefined> {
  const records = (await conversationRuns(store, conversationId)).reverse();
  if (!records.length) return undefined;
  const runs: TranscriptRun[] = [];
  for (const record of records) {
    runs.push(transcriptRun(record, await store.getEvents(record.runId)));
  }
  return document(conversationId, records, runs);
}

/** One run's transcript; undefined when the run is unknown. */
export async function runTranscript(
  store: RunStore,
  runId: string,
): Promise<Transcript | undefined> {
  const record = await store.getRun(runId);
  if (!record) return undefined;
  return document(record.conversationId ?? null, [record], [
    transcriptRun(record, await store.getEvents(runId)),
  ]);
}

const FINAL: readonly string[] = ["completed", "failed", "cancelled"];
const ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$/;

function refuse(message: string): never {
  throw new RunnerError(
    "http.bad_request",
    `${message} Send a transcript as GET /v1/conversations/{id}/transcript?format=json or runner conversations export writes it, unchanged.`,
  );
}

function isObject(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === "object" && !Array.isArray(value);
}

function time(value: unknown, where: string): number {
  const ms = typeof value === "string" ? Date.parse(value) : NaN;
  if (!Number.isFinite(ms)) refuse(`${where} is not an ISO 8601 time.`);
  return ms;
}

function optionalText(value: unknown, where: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== "string") refuse(`${where} must be a string or null.`);
  return value;
}

function checkEvents(value: unknown, where: string): RunEvent[] {
  if (!Array.isArray(value)) refuse(`${where}.events must be an array.`);
  let last = 0;
  return value.map((event, index) => {
    const at = `${where}.events[${index}]`;
    if (!isObject(event) || typeof event.type !== "string" || !event.type) {
      refuse(`${at} must be an object with a type.`);
    }
    if (!isObject(event.data)) refuse(`${at}.data must be an object.`);
    const { sequence, timestamp } = event;
    if (
      typeof sequence !== "number" || !Number.isSafeInteger(sequence) ||
      sequence <= last
    ) {
      refuse(`${at}.sequence must be a whole number above the one before.`);
    }
    if (typeof timestamp !== "number" || !Number.isFinite(timestamp)) {
      refuse(`${at}.timestamp must be milliseconds since the epoch.`);
    }
    last = sequence;
    return event as unknown as RunEvent;
  });
}

function checkRun(
  value: unknown,
  index: number,
  conversationId: string | null,
): ImportedRun {
  const where = `runs[${index}]`;
  if (!isObject(value)) refuse(`${where} must be an object.`);
  if (typeof value.run_id !== "string" || !ID.test(value.run_id)) {
    refuse(`${where}.run_id is not a run id.`);
  }
  if ((value.conversation_id ?? null) !== conversationId) {
    refuse(`${where} belongs to another conversation.`);
  }
  if (!FINAL.includes(value.status as string)) {
    refuse(
      `${where} (${value.run_id}) had not ended when it was exported (status ${
        JSON.stringify(value.status)
      }); export it again once it has.`,
    );
  }
  if (!isObject(value.config)) refuse(`${where}.config must be an object.`);
  const updatedAt = time(value.updated_at, `${where}.updated_at`);
  return {
    record: {
      runId: value.run_id,
      conversationId: conversationId ?? undefined,
      status: value.status as FinalRunStatus,
      config: value.config,
      prompt: optionalText(value.prompt, `${where}.prompt`),
      code: optionalText(value.code, `${where}.code`),
      error: optionalText(value.error, `${where}.error`),
      createdAt: time(value.created_at, `${where}.created_at`),
      updatedAt,
      finishedAt: value.finished_at == null
        ? updatedAt
        : time(value.finished_at, `${where}.finished_at`),
      usage: usageFrom(value.usage),
    },
    events: checkEvents(value.events, where),
  };
}

/**
 * The runs of a `runner-transcript` v1 document, checked.
 *
 * @throws `http.bad_request` for anything else: another format or version,
 * a malformed field, a run that had not ended, a repeated run id.
 */
export function parseTranscript(value: unknown): {
  conversationId: string | null;
  runs: ImportedRun[];
} {
  if (!isObject(value) || value.format !== TRANSCRIPT_FORMAT) {
    refuse(
      `This is not a ${TRANSCRIPT_FORMAT} document (format is missing or different).`,
    );
  }
  if (value.version !== TRANSCRIPT_VERSION) {
    refuse(
      `${TRANSCRIPT_FORMAT} version ${
        JSON.stringify(value.version)
      } is not one this runner reads (it reads version ${TRANSCRIPT_VERSION}).`,
    );
  }
  if (!isObject(value.conversation)) refuse("conversation must be an object.");
  const conversationId = value.conversation.conversation_id ?? null;
  if (
    conversationId !== null &&
    (typeof conversationId !== "string" || !ID.test(conversationId))
  ) {
    refuse("conversation.conversation_id is not a conversation id.");
  }
  if (!Array.isArray(value.runs) || !value.runs.length) {
    refuse("runs must be a non-empty array.");
  }
  const runs = value.runs.map((run, index) =>
    checkRun(run, index, conversationId as string | null)
  );
  const ids = new Set(runs.map(({ record }) => record.runId));
  if (ids.size !== runs.length) refuse("A run id appears twice in runs.");
  return { conversationId: conversationId as string | null, runs };
}

/** What {@linkcode importTranscript} stored. */
export interface ImportedTranscript {
  /** The conversation, or null. */
  conversationId: string | null;
  /** The ids of the runs stored. */
  runIds: string[];
  /** How many events they hold. */
  events: number;
}

/**
 * Checks a transcript document and stores its runs and events, all or
 * nothing.
 *
 * @throws `http.bad_request` for a document that is not a valid transcript;
 * `http.conflict` when one of its runs is already stored, or its
 * conversation already has runs or sessions here (nothing is written).
 */
export async function importTranscript(
  store: RunStore,
  value: unknown,
): Promise<ImportedTranscript> {
  const { conversationId, runs } = parseTranscript(value);
  const conflict = await store.importRuns(runs);
  if (conflict?.kind === "runs") {
    const taken = conflict.runIds;
    throw new RunnerError(
      "http.conflict",
      `${taken.length === 1 ? "Run" : "Runs"} ${taken.join(", ")} ${
        taken.length === 1 ? "is" : "are"
      } already stored here; nothing was imported. A transcript is imported once: this one (or a run of it) is already in this runner's store.`,
      { detail: { run_ids: taken } },
    );
  }
  if (conflict?.kind === "conversation") {
    throw new RunnerError(
      "http.conflict",
      `Conversation ${conflict.conversationId} already has runs or sessions here; nothing was imported. A transcript starts a conversation of its own: set conversation.conversation_id (and each run's conversation_id) to an id this runner does not use yet.`,
      { detail: { conversation_id: conflict.conversationId } },
    );
  }
  return {
    conversationId,
    runIds: runs.map(({ record }) => record.runId),
    events: runs.reduce((sum, { events }) => sum + events.length, 0),
  };
}
