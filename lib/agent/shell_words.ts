/**
 * Shell-style word splitting and quoting for agent commands such as
 * `acp-command = npx -y @zed-industries/codex-acp`. Splitting follows Python's
 * `shlex.split` (POSIX mode, no comments) exactly; no shell is ever run.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";

/** What Python's `shlex` counts as whitespace (not \f or \v). */
const WHITESPACE = new Set([" ", "\t", "\n", "\r"]);
/** Characters a backslash escapes inside double quotes (shlex: the quote and the escape). */
const DOUBLE_QUOTE_ESCAPABLE = new Set(["\\", '"']);
/** Words made only of these characters need no quoting (as Python's `shlex.quote`). */
const SAFE_WORD = /^[A-Za-z0-9@%+=:,./_-]+$/;

/**
 * Splits a command line into argv words exactly as Python's
 * `shlex.split(text)` does (POSIX mode, no comments), so an `acp-command`
 * pasted from the Python LangBot plugin means the same here. Nothing is
 * expanded: single quotes keep everything literally; inside double quotes a
 * backslash escapes only `\` and `"` (before anything else, `$` included,
 * it stays); outside quotes a backslash takes the next character literally,
 * a newline too; runs of space, tab, CR and LF separate words.
 *
 * @throws {RunnerError} `config.invalid` on an unclosed quote, a trailing
 * backslash, or a command with no words.
 */
export function splitCommand(text: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let index = 0;
  while (index < text.length) {
    const char = text[index];
    if (WHITESPACE.has(char)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      index++;
    } else if (char === "'") {
      const end = text.indexOf("'", index + 1);
      if (end === -1) throw unclosed("single", text);
      word += text.slice(index + 1, end);
      inWord = true;
      index = end + 1;
    } else if (char === '"') {
      const [content, end] = readDoubleQuoted(text, index + 1);
      word += content;
      inWord = true;
      index = end + 1;
    } else if (char === "\\") {
      if (index + 1 >= text.length) throw danglingBackslash(text);
      word += text[index + 1];
      inWord = true;
      index += 2;
    } else {
      word += char;
      inWord = true;
      index++;
    }
  }
  if (inWord) words.push(word);
  if (words.length === 0) {
    throw new RunnerError(
      "config.invalid",
      "The agent command is empty; set acp-command to the command that starts an ACP stdio server, e.g. `opencode acp`.",
    );
  }
  return words;
}

/** Reads a double-quoted section starting after the opening quote; returns its text and the closing quote's index. */
function readDoubleQuoted(text: string, start: number): [string, number] {
  let content = "";
  let index = start;
  while (index < text.length) {
    const char = text[index];
    if (char === '"') return [content, index];
    if (char === "\\") {
      if (index + 1 >= text.length) throw danglingBackslash(text);
      const next = text[index + 1];
      content += DOUBLE_QUOTE_ESCAPABLE.has(next) ? next : char + next;
      index += 2;
      continue;
    }
    content += char;
    index++;
  }
  throw unclosed("double", text);
}

function danglingBackslash(text: string): RunnerError {
  return new RunnerError(
    "config.invalid",
    `The command ${
      JSON.stringify(text)
    } ends with a backslash that escapes nothing; remove it or quote it.`,
  );
}

function unclosed(kind: "single" | "double", text: string): RunnerError {
  return new RunnerError(
    "config.invalid",
    `The command ${
      JSON.stringify(text)
    } has an unclosed ${kind} quote; close it or escape the quote character.`,
  );
}

/**
 * Quotes one word so a POSIX shell reads it back unchanged (single quotes;
 * a `'` inside becomes `'"'"'`). Safe words are returned as they are.
 */
export function quoteWord(word: string): string {
  if (word === "") return "''";
  if (SAFE_WORD.test(word)) return word;
  return `'${word.replaceAll("'", `'"'"'`)}'`;
}

/**
 * Joins argv into one command line that a POSIX shell (for example a remote
 * shell reached over `ssh`) splits back into exactly these words.
 */
export function quoteCommand(argv: readonly string[]): string {
  return argv.map(quoteWord).join(" ");
}
