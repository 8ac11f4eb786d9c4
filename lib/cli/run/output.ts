/**
 * What `runner run` prints: agent text on stdout (tool calls, plans,
 * permissions and errors on stderr) for humans, or one event per line with
 * `--json` (the full form, `all_content` included), in batched writes.
 *
 * @module
 */

import { createEventRestorer, type RunEvent } from "../../events.ts";
import {
  type BufferedOutput,
  createBufferedOutput,
} from "./buffered_output.ts";

/** Events that print nothing for humans (they leave the progress line up). */
const SILENT_EVENTS = new Set([
  // The download's own line is on stderr (`cli/install_progress.ts`).
  "agent.installing",
  "run.started",
  "state.updated",
  "usage.updated",
  "agent.update",
  "thought.delta",
  "terminal.output",
]);

/** Prints run events, as JSON lines or for humans, in batched writes. */
export interface EventPrinter {
  /** Prints one event. */
  print(event: RunEvent): void;
  /** Writes whatever is still buffered. */
  flush(): void;
}

/** How long printed text may wait in the buffer, in ms. */
const OUTPUT_DELAY_MS = 20;

/**
 * Makes the printer of `runner run`'s events; `beforeOutput` runs before the
 * first event that prints for humans (it erases the progress line).
 */
export function eventPrinter(
  json: boolean,
  beforeOutput: () => void,
): EventPrinter {
  const stdout = createBufferedOutput({
    target: Deno.stdout,
    delayMs: OUTPUT_DELAY_MS,
    flushOnNewline: !json,
  });
  if (json) {
    const withAllContent = createEventRestorer({ allContent: true });
    return {
      print: (event) =>
        stdout.write(JSON.stringify(withAllContent(event)) + "\n"),
      flush: stdout.flush,
    };
  }
  const output: HumanOutput = {
    stdout,
    textOpen: false,
    wroteText: false,
  };
  return {
    print: (event) => {
      if (!SILENT_EVENTS.has(event.type)) beforeOutput();
      printHuman(event, output);
    },
    flush: stdout.flush,
  };
}

/** What human output has written so far. */
interface HumanOutput {
  /** Buffered stdout (flushed before anything goes to stderr). */
  stdout: BufferedOutput;
  /** Agent text on stdout that did not end with a newline. */
  textOpen: boolean;
  /** Whether the current turn's text was streamed as deltas. */
  wroteText: boolean;
}

/** A client terminal's start or exit, as a line of stderr. */
function terminalLine(type: string, data: Record<string, unknown>): string {
  if (type === "terminal.started") {
    const args = (data.args as string[]).join(" ");
    return `[terminal] ${data.command}${
      args ? ` ${args}` : ""
    } (in ${data.cwd})\n`;
  }
  const how = data.signal
    ? `killed by ${data.signal}`
    : `exit ${data.exit_code}`;
  return `[terminal ${data.timed_out ? "timed out" : "exited"}] ${how}\n`;
}

function printHuman(event: RunEvent, output: HumanOutput) {
  const write = (stream: typeof Deno.stdout, text: string) => {
    if (stream === Deno.stdout) return output.stdout.write(text);
    output.stdout.flush();
    stream.writeSync(new TextEncoder().encode(text));
  };
  const writeText = (text: string) => {
    if (!text) return;
    write(Deno.stdout, text);
    output.textOpen = !text.endsWith("\n");
  };
  const data = event.data as Record<string, unknown>;
  switch (event.type) {
    case "message.delta":
      writeText(String((data.chunk as { content?: string }).content ?? ""));
      output.wroteText = true;
      return;
    case "message.completed":
      if (!output.wroteText) {
        writeText(
          String((data.message as { content?: string }).content ?? ""),
        );
      }
      write(Deno.stdout, "\n");
      output.textOpen = false;
      output.wroteText = false;
      return;
    case "tool.call.started":
      write(Deno.stderr, `[tool] ${data.tool_name}\n`);
      return;
    case "tool.call.completed":
      write(
        Deno.stderr,
        `[tool ${data.error ? "failed" : "done"}] ${data.tool_name}\n`,
      );
      return;
    case "plan.updated":
      write(
        Deno.stderr,
        `[plan] ${
          (data.entries as Array<{ content?: string; status?: string }>)
            .map((entry) => `${entry.status ?? ""}: ${entry.content ?? ""}`)
            .join("; ")
        }\n`,
      );
      return;
    case "permission.decided":
      write(
        Deno.stderr,
        `[permission] ${data.title ?? "request"}: ${
          data.option_id ?? data.outcome
        }\n`,
      );
      return;
    case "terminal.started":
    case "terminal.exited":
      write(Deno.stderr, terminalLine(event.type, data));
      return;
    case "run.failed":
      // End the unfinished answer line first, so the error is on its own line
      // when stdout and stderr share a terminal or a file.
      if (output.textOpen) write(Deno.stdout, "\n");
      output.textOpen = false;
      write(Deno.stderr, `error [${data.code}]: ${data.error}\n`);
      return;
  }
}
