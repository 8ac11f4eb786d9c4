/**
 * A transcript (`transcript.ts`) as Markdown for a person: each run's
 * prompts, answers, tool calls with their outcome, plans, permission
 * decisions and usage (`docs/transcripts.md`).
 *
 * @module
 */

import type { RunEvent } from "../events.ts";
import type { Transcript, TranscriptRun } from "./transcript.ts";

/** Quotes text as a Markdown block quote. */
function quote(text: string): string {
  return text.split("\n").map((line) => `> ${line}`.trimEnd()).join("\n");
}

/** A fenced code block whose fence no line of `text` closes. */
function fenced(text: string, language = ""): string {
  const longest = Math.max(
    2,
    ...[...text.matchAll(/`+/g)].map((match) => match[0].length),
  );
  const fence = "`".repeat(longest + 1);
  return `${fence}${language}\n${text}\n${fence}`;
}

function inline(value: unknown): string {
  return String(value ?? "").replace(/\s+/g, " ").replace(/`/g, "'");
}

/** One line of usage: tokens in LangBot's names, the window and the cost. */
export function usageLine(usage: unknown): string | undefined {
  if (!usage || typeof usage !== "object") return undefined;
  const parts: string[] = [];
  for (const [key, value] of Object.entries(usage)) {
    if (typeof value === "number") parts.push(`${key} ${value}`);
  }
  const { cost, costs } = usage as { cost?: unknown; costs?: unknown };
  for (const item of [cost, ...(Array.isArray(costs) ? costs : [])]) {
    if (item && typeof item === "object") {
      const { amount, currency } = item as Record<string, unknown>;
      parts.push(`cost ${amount} ${inline(currency)}`);
    }
  }
  return parts.length ? parts.join(", ") : undefined;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function toolOutcome(data: Record<string, unknown>): string {
  if (data.error !== undefined && data.error !== null) {
    return `failed: ${
      inline(
        typeof data.error === "string"
          ? data.error
          : JSON.stringify(data.error),
      )
    }`;
  }
  return "completed";
}

function plan(entries: unknown): string {
  if (!Array.isArray(entries)) return "";
  return entries.map((entry) => {
    const { content, status } = (entry ?? {}) as Record<string, unknown>;
    const mark = status === "completed" ? "x" : " ";
    return `- [${mark}] ${inline(content)}${
      status && status !== "completed" ? ` (${inline(status)})` : ""
    }`;
  }).join("\n");
}

type ToolCalls = Map<string, { name: string; parameters: unknown }>;

/** Remembers a started or updated tool call's name and input. */
function noteToolCall(tools: ToolCalls, data: Record<string, unknown>): void {
  const id = String(data.tool_call_id ?? "");
  const known = tools.get(id);
  tools.set(id, {
    name: text(data.tool_name) || known?.name || id,
    parameters:
      data.parameters !== undefined && JSON.stringify(data.parameters) !== "{}"
        ? data.parameters
        : known?.parameters,
  });
}

/** A finished tool call: its name, outcome, input and result. */
function toolCallBlock(
  tools: ToolCalls,
  data: Record<string, unknown>,
): string {
  const id = String(data.tool_call_id ?? "");
  const call = tools.get(id);
  tools.delete(id);
  const name = text(data.tool_name) || call?.name || id;
  const lines = [`**Tool call** \`${inline(name)}\` — ${toolOutcome(data)}`];
  if (call?.parameters !== undefined) {
    lines.push(fenced(JSON.stringify(call.parameters, null, 2), "json"));
  }
  if (data.result !== undefined && data.result !== null) {
    const result = typeof data.result === "string"
      ? data.result
      : JSON.stringify(data.result, null, 2);
    lines.push(fenced(result));
  }
  return lines.join("\n\n");
}

/** The Markdown of one run's events, in order. */
function runBody(run: TranscriptRun): string[] {
  const out: string[] = [];
  const tools: ToolCalls = new Map();
  let answer = "";
  const flushAnswer = () => {
    if (answer) out.push(`**Agent**\n\n${answer}`);
    answer = "";
  };
  if (run.prompt !== null) {
    out.push(`**Prompt** (turn 1)\n\n${quote(run.prompt)}`);
  }
  for (const event of run.events as RunEvent[]) {
    const data = event.data ?? {};
    switch (event.type) {
      case "turn.started": {
        flushAnswer();
        const input = (data.input ?? {}) as Record<string, unknown>;
        out.push(
          `**Prompt** (turn ${inline(data.turn)})\n\n${
            quote(text(input.text))
          }`,
        );
        break;
      }
      case "message.delta": {
        const chunk = (data.chunk ?? {}) as Record<string, unknown>;
        answer += text(chunk.content);
        break;
      }
      case "message.completed": {
        const message = (data.message ?? {}) as Record<string, unknown>;
        answer = text(message.content) || answer;
        flushAnswer();
        break;
      }
      case "tool.call.started":
      case "tool.call.updated":
        noteToolCall(tools, data);
        break;
      case "tool.call.completed":
        flushAnswer();
        out.push(toolCallBlock(tools, data));
        break;
      case "plan.updated":
        flushAnswer();
        out.push(`**Plan**\n\n${plan(data.entries)}`);
        break;
      case "permission.decided":
        flushAnswer();
        out.push(
          `**Permission** \`${inline(data.title ?? data.tool_call_id)}\`: ${
            inline(data.decision)
          } (by ${inline(data.by)}${
            data.reason ? `: ${inline(data.reason)}` : ""
          })`,
        );
        break;
      case "run.failed":
        flushAnswer();
        out.push(
          `**Failed** \`${inline(data.code)}\`: ${inline(data.error)}`,
        );
        break;
      case "run.completed": {
        const message = (data.message ?? {}) as Record<string, unknown>;
        if (!answer && text(message.content)) answer = text(message.content);
        flushAnswer();
        break;
      }
    }
  }
  flushAnswer();
  for (const [id, call] of tools) {
    out.push(`**Tool call** \`${inline(call.name || id)}\` — did not finish`);
  }
  return out;
}

/** A transcript as Markdown. */
export function transcriptMarkdown(transcript: Transcript): string {
  const { conversation_id: conversationId } = transcript.conversation;
  const lines: string[] = [
    conversationId === null
      ? `# Run ${transcript.runs[0]?.run_id ?? ""}`
      : `# Conversation ${conversationId}`,
    "",
    `${transcript.runs.length} run${
      transcript.runs.length === 1 ? "" : "s"
    }, exported ${transcript.exported_at}.`,
  ];
  const total = usageLine(transcript.conversation.usage);
  if (total) lines.push("", `Usage: ${total}`);
  for (const run of transcript.runs) {
    const config = run.config ?? {};
    const about = [
      config.provider ? `provider ${inline(config.provider)}` : "",
      config.model ? `model ${inline(config.model)}` : "",
      `started ${run.created_at}`,
    ].filter(Boolean).join(", ");
    lines.push("", `## Run ${run.run_id} — ${run.status}`, "", about);
    for (const block of runBody(run)) lines.push("", block);
    const usage = usageLine(run.usage);
    lines.push("", `Usage: ${usage ?? "not reported"}`);
  }
  return lines.join("\n") + "\n";
}
