/**
 * The service log: one line per notable event, JSON (for log collectors and
 * tests) or `time LEVEL msg key=value` text; by default text on a terminal
 * and JSON otherwise. Entries below the chosen level are dropped. Every line
 * passes through secret redaction first.
 *
 * @module
 */

import { redactDeep } from "./secrets.ts";

/** A structured log entry; `msg` names the event. */
export type LogEntry = { msg: string } & Record<string, unknown>;

/**
 * Writes structured log entries. An entry with `always: true` (the service's
 * lifecycle: listening, shutting down, stopped) is written at every level.
 */
export type Logger = (entry: Record<string, unknown>) => void;

/** Log levels, least severe first. */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;

/** How much is logged: this level and above. */
export type LogLevel = typeof LOG_LEVELS[number];

/** The log formats. */
export const LOG_FORMATS = ["json", "text"] as const;

/** How each line is written. */
export type LogFormat = typeof LOG_FORMATS[number];

/** Options for {@linkcode createLogger}. */
export interface LoggerOptions {
  /** Values never written (API tokens, env-json values); read at each write. */
  secrets: () => Iterable<string>;
  /** The least severe level written (default info). */
  level?: LogLevel;
  /** The line format (default: text when stderr is a terminal, else JSON). */
  format?: LogFormat;
  /** Human-readable lines instead of JSON (the same as `format: "text"`). */
  human?: boolean;
  /** Where lines go (default: stderr). */
  write?: (line: string) => void;
}

function rank(level: unknown): number {
  const index = LOG_LEVELS.indexOf(level as LogLevel);
  return index === -1 ? LOG_LEVELS.indexOf("info") : index;
}

/** Makes a logger that redacts `options.secrets` from every entry. */
export function createLogger(options: LoggerOptions): Logger {
  const human = options.format
    ? options.format === "text"
    : options.human ?? Deno.stderr.isTerminal();
  const least = rank(options.level ?? "info");
  const encoder = new TextEncoder();
  const write = options.write ??
    ((line: string) => Deno.stderr.writeSync(encoder.encode(line)));
  return ({ always, ...raw }) => {
    if (!always && rank(raw.level) < least) return;
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
