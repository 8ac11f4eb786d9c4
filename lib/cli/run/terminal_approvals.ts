/**
 * `runner run` on a terminal: asks the person at the keyboard to answer the
 * agent's permission requests (`permission-decision=ask`), one line each.
 *
 * @module
 */

import type { PermissionOptionKind } from "@agentclientprotocol/sdk";
import type { RunEvent } from "../../events.ts";
import type { PermissionAnswer } from "../../run/permission_desk.ts";

/** The keys a person types, and the decision each means. */
export const TERMINAL_ANSWERS: Readonly<Record<string, PermissionOptionKind>> =
  {
    y: "allow_once",
    yes: "allow_once",
    a: "allow_always",
    always: "allow_always",
    n: "reject_once",
    no: "reject_once",
    N: "reject_always",
    never: "reject_always",
  };

/**
 * The permission decision `runner run` uses: the `--permission-decision`
 * flag when given (`ask` only with a terminal, else the fallback); without
 * the flag, `ask` when stdin and stderr are terminals and events are not
 * printed as JSON, else the config default.
 */
export function terminalPermissionDecision(options: {
  flag?: string;
  fallback?: string;
  json: boolean;
  interactive: boolean;
}): string | undefined {
  const canAsk = options.interactive && !options.json;
  if (options.flag !== undefined) {
    const asked = options.flag.trim().toLowerCase() === "ask";
    return asked && !canAsk ? options.fallback ?? "reject_once" : options.flag;
  }
  return canAsk ? "ask" : undefined;
}

/** Options for {@linkcode createTerminalApprover}. */
export interface TerminalApproverOptions {
  /** Hands the person's answer to the run. */
  answer(requestId: string, answer: PermissionAnswer): void;
  /** Where the person types (default stdin). */
  input?: ReadableStream<Uint8Array>;
  /** Where the question goes (default stderr). */
  write?: (text: string) => void;
}

/** Turns each `permission.requested` event into a question on the terminal. */
export function createTerminalApprover(
  options: TerminalApproverOptions,
): (event: RunEvent) => void {
  const write = options.write ??
    ((text: string) => Deno.stderr.writeSync(new TextEncoder().encode(text)));
  let lines: AsyncGenerator<string> | undefined;
  let turn = Promise.resolve();
  return (event) => {
    if (event.type !== "permission.requested") return;
    turn = turn.then(async () => {
      lines ??= readLines(options.input ?? Deno.stdin.readable);
      const decision = await askOnce(event.data, lines, write);
      if (decision) {
        options.answer(String(event.data.request_id), { decision });
      }
    });
  };
}

async function askOnce(
  data: Record<string, unknown>,
  lines: AsyncGenerator<string>,
  write: (text: string) => void,
): Promise<PermissionOptionKind | undefined> {
  write(`${describeRequest(data)}\n`);
  for (;;) {
    write("  [y]es once / [a]lways / [n]o / [N]ever: ");
    const { value, done } = await lines.next();
    if (done) return undefined;
    const typed = value.trim();
    const decision = TERMINAL_ANSWERS[typed] ??
      TERMINAL_ANSWERS[
        typed.toLowerCase() === "n" ? typed : typed.toLowerCase()
      ];
    if (decision) return decision;
  }
}

/** One line: what the agent wants to do, and where. */
function describeRequest(data: Record<string, unknown>): string {
  const toolCall = (data.tool_call ?? {}) as Record<string, unknown>;
  const where = ((toolCall.locations ?? []) as { path: string }[])
    .map((location) => location.path).join(", ");
  const input = toolCall.raw_input_summary
    ? ` ${toolCall.raw_input_summary}`
    : "";
  return `[permission] ${toolCall.title ?? "The agent asks"}${
    toolCall.kind ? ` (${toolCall.kind})` : ""
  }${where ? ` on ${where}` : ""}${input}`;
}

async function* readLines(
  stream: ReadableStream<Uint8Array>,
): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of stream) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffer.indexOf("\n")) >= 0) {
      yield buffer.slice(0, newline).replace(/\r$/, "");
      buffer = buffer.slice(newline + 1);
    }
  }
  if (buffer) yield buffer;
}
