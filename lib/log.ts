/**
 * The service log: one line per notable event, JSON when the output is not a
 * terminal (for log collectors and tests), `time msg key=value` on a TTY.
 * Every line passes through secret redaction first.
 *
 * @module
 */

import { redactDeep } from "./secrets.ts";

/** A structured log entry; `msg` names the event. */
export type LogEntry = { msg: string } & Record<string, unknown>;

/** Writes structured log entries. */
export type Logger = (entry: Record<string, unknown>) => void;

/** Options for {@linkcode createLogger}. */
export interface LoggerOptions {
  /** Values never written (API tokens, env-json values); read at each write. */
  secrets: () => Iterable<string>;
  /** Human-readable lines instead of JSON (default: whether stderr is a TTY). */
  human?: boolean;
  /** Where lines go (default: stderr). */
  write?: (line: string) => void;
}

/** Makes a logger that redacts `options.secrets` from every entry. */
export function createLogger(options: LoggerOptions): Logger {
  const human = options.human ?? Deno.stderr.isTerminal();
  const encoder = new TextEncoder();
  const write = options.write ??
    ((line: string) => Deno.stderr.writeSync(encoder.encode(line)));
  return (raw) => {
    const entry = redactDeep(
      { time: new Date().toISOString(), level: "info", ...raw },
      options.secrets(),
    );
    write((human ? formatHuman(entry) : JSON.stringify(entry)) + "\n");
  };
}

function formatHuman(entry: Record<string, unknown>): string {
  const { time, level, msg, ...rest } = entry;
  const fields = Object.entries(rest)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) =>
      `${key}=${
        typeof value === "string" && !/\s/.test(value)
          ? value
          : JSON.stringify(value)
      }`
    );
  const marker = level === "info" ? "" : ` ${String(level).toUpperCase()}`;
  return `${String(time).slice(11, 19)}${marker} ${msg}${
    fields.length ? " " + fields.join(" ") : ""
  }`;
}
