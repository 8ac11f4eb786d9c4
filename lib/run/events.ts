/**
 * Translates ACP `session/update`s into run events, and numbers events.
 * Message text, thoughts, tool calls, plans, usage and unknown kinds each get
 * their own event types (`docs/events.md`); nothing pollutes message text.
 *
 * @module
 */

import type { RunEvent, RunUsage } from "../events.ts";
import { isTerminalEvent, windowFromAcp } from "../events.ts";

/** The text streams a delta can belong to: the assistant message or thoughts. */
export type DeltaStream = "message" | "thought";

/** Options for {@linkcode createEventEmitter}. */
export interface EventEmitterOptions {
  /** The run id stamped on every event. */
  runId: string;
  /** Receives numbered events. */
  sink: (event: RunEvent) => void;
  /** Sees events dropped because the run had already ended. */
  onDropped?: (event: RunEvent) => void;
}

/** Numbers events, stamps run id and time, and enforces one terminal event. */
export interface EventEmitter {
  /** Emits one event (dropped, and reported, after the terminal event). */
  emit(type: string, data: Record<string, unknown>, usage?: RunUsage): void;
  /** Whether the terminal event has been emitted. */
  readonly ended: boolean;
}

/** Makes an {@linkcode EventEmitter}. */
export function createEventEmitter(options: EventEmitterOptions): EventEmitter {
  let sequence = 0;
  let ended = false;
  return {
    emit(type, data, usage) {
      const event: RunEvent = {
        run_id: options.runId,
        type,
        data,
        ...(usage ? { usage } : {}),
        sequence: 0,
        timestamp: Date.now(),
      };
      if (ended) {
        options.onDropped?.(event);
        return;
      }
      event.sequence = ++sequence;
      if (isTerminalEvent(event)) ended = true;
      options.sink(event);
    },
    get ended() {
      return ended;
    },
  };
}

/**
 * Text built from many small pieces without keeping every piece alive: the
 * pieces are joined in batches (a string grown by `+=` from 100 000 chunks
 * keeps each chunk, and the garbage collector copies them again and again).
 */
export class TextBuilder {
  #text = "";
  #parts: string[] = [];

  /** Appends `piece`. */
  append(piece: string): void {
    this.#parts.push(piece);
    if (this.#parts.length >= 256) this.#join();
  }

  /** Whether nothing has been appended (or only empty pieces). */
  get empty(): boolean {
    return !this.#text && this.#parts.every((part) => !part);
  }

  /** The whole text. */
  toString(): string {
    if (this.#parts.length) this.#join();
    return this.#text;
  }

  #join(): void {
    this.#text += this.#parts.join("");
    this.#parts = [];
  }
}

/** One assistant message being assembled during a turn. */
export interface TurnState {
  /** The text so far. */
  text: TextBuilder;
  /** Tool calls already reported as started. */
  startedTools: Map<string, string>;
}

/** Options for {@linkcode applyUpdate}. */
export interface ApplyUpdateOptions {
  /** The raw update (`sessionUpdate` names its kind). */
  update: Record<string, unknown>;
  /** The open turn, or undefined outside a turn. */
  turn: TurnState | undefined;
  /** Emits an event. */
  emit: EventEmitter["emit"];
  /** Hands on a chunk of message or thought text (the coalescing stage), appending it to `keep` too. */
  text: (stream: DeltaStream, text: string, keep?: TextBuilder) => void;
  /** Whether deltas and progress events are streamed. */
  streaming: boolean;
  /** Receives usage reports. */
  onUsage: (usage: RunUsage) => void;
}

/** Applies one session update: updates the turn and emits its events. */
export function applyUpdate(options: ApplyUpdateOptions): void {
  const { update, turn, emit, streaming } = options;
  const kind = String(update.sessionUpdate ?? "");
  switch (kind) {
    case "agent_message_chunk": {
      const text = contentText(update.content);
      if (!turn) {
        emit("agent.update", { kind, update });
        return;
      }
      if (!text) {
        if (streaming) emit("agent.update", { kind, update });
        return;
      }
      if (streaming) options.text("message", text, turn.text);
      else turn.text.append(text);
      return;
    }
    case "agent_thought_chunk": {
      if (!streaming) return;
      const text = contentText(update.content);
      if (text) options.text("thought", text);
      else emit("agent.update", { kind, update });
      return;
    }
    case "tool_call":
    case "tool_call_update":
      toolEvents(update, turn, streaming ? emit : undefined);
      return;
    case "plan":
      if (streaming) emit("plan.updated", { entries: update.entries ?? [] });
      return;
    case "usage_update": {
      const usage = windowFromAcp(update);
      options.onUsage(usage);
      if (streaming) emit("usage.updated", { ...usage });
      return;
    }
    default:
      if (streaming) emit("agent.update", { kind, update });
  }
}

function toolEvents(
  update: Record<string, unknown>,
  turn: TurnState | undefined,
  emit: EventEmitter["emit"] | undefined,
) {
  const id = String(update.toolCallId ?? "");
  const started = turn?.startedTools ?? new Map<string, string>();
  const status = String(update.status ?? "");
  const name = String(update.title ?? started.get(id) ?? update.kind ?? "tool");
  const known = started.has(id);
  started.set(id, known && !update.title ? started.get(id)! : name);
  const diffs = contentDiffs(update.content);
  const terminals = terminalIds(update.content);
  if (!known) {
    emit?.("tool.call.started", {
      tool_call_id: id,
      tool_name: name,
      parameters: update.rawInput ?? {},
      kind: update.kind ?? null,
      ...(status ? { status } : {}),
      ...(update.locations ? { locations: update.locations } : {}),
      ...(diffs ? { diffs } : {}),
      ...terminals,
    });
  }
  // Agents may send the input, a better title or the locations only in a
  // later update (claude-agent-acp does): carry them.
  const carried = known ? carriedToolFields(update) : {};
  if (known && diffs && !finished(status)) carried.diffs = diffs;
  if (known && !finished(status)) Object.assign(carried, terminals);
  const done = finished(status);
  const progress = !done && update.sessionUpdate === "tool_call_update";
  if (progress || Object.keys(carried).length) {
    emit?.("tool.call.updated", {
      tool_call_id: id,
      status: status || null,
      ...carried,
    });
  }
  if (done) {
    const data: Record<string, unknown> = {
      tool_call_id: id,
      tool_name: started.get(id) ?? name,
    };
    if (diffs) data.diffs = diffs;
    Object.assign(data, terminals);
    const result = update.rawOutput ?? contentListText(update.content);
    if (status === "failed") data.error = result ?? "failed";
    else if (result !== undefined) data.result = result;
    emit?.("tool.call.completed", data);
  }
}

function finished(status: string): boolean {
  return status === "completed" || status === "failed";
}

/** The file edits (ACP `diff` content) of a tool call update, if any. */
function contentDiffs(
  content: unknown,
): { path: string; old_text: string | null; new_text: string }[] | undefined {
  if (!Array.isArray(content)) return undefined;
  const diffs = content.filter((item) =>
    item && typeof item === "object" && item.type === "diff" &&
    typeof item.path === "string" && typeof item.newText === "string"
  ).map((item) => ({
    path: item.path as string,
    old_text: typeof item.oldText === "string" ? item.oldText : null,
    new_text: item.newText as string,
  }));
  return diffs.length ? diffs : undefined;
}

/** `terminal_ids` of the client terminals a tool call update shows (none: nothing). */
function terminalIds(content: unknown): { terminal_ids?: string[] } {
  if (!Array.isArray(content)) return {};
  const ids = content.filter((item) =>
    item && typeof item === "object" && item.type === "terminal" &&
    typeof item.terminalId === "string"
  ).map((item) => item.terminalId as string);
  return ids.length ? { terminal_ids: ids } : {};
}

/** What a later update of a started tool call adds: input, title, kind, locations. */
function carriedToolFields(
  update: Record<string, unknown>,
): Record<string, unknown> {
  const carried: Record<string, unknown> = {};
  const input = update.rawInput;
  const emptyObject = input && typeof input === "object" &&
    !Array.isArray(input) && !Object.keys(input).length;
  if (input !== undefined && input !== null && !emptyObject) {
    carried.parameters = input;
  }
  if (update.title) carried.tool_name = String(update.title);
  if (update.kind) carried.kind = update.kind;
  if (update.locations) carried.locations = update.locations;
  return carried;
}

function contentText(content: unknown): string {
  if (!content || typeof content !== "object") return "";
  const block = content as { type?: string; text?: unknown };
  return block.type === "text" && typeof block.text === "string"
    ? block.text
    : "";
}

function contentListText(content: unknown): string | undefined {
  if (!Array.isArray(content)) return undefined;
  const parts = content.map((item) =>
    item && typeof item === "object" && "content" in item
      ? contentText((item as { content: unknown }).content)
      : ""
  ).filter(Boolean);
  return parts.length ? parts.join("\n") : undefined;
}
