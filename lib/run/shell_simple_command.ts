/**
 * Reading a `sh -c` script as one simple command, or not at all: the
 * permission rules look through `sh -c SCRIPT` only when the script is a
 * single command whose words are literal (quotes allowed, nothing that any
 * shell expands or treats as syntax). See `docs/permissions.md`, "Terminal
 * rules".
 *
 * @module
 */

/** A variable assignment before a command (`NAME=value git status`). */
export interface EnvAssignment {
  /** The variable's name. */
  name: string;
  /** Its value. */
  value: string;
}

/** A script that is one simple command. */
export interface SimpleCommand {
  /** The assignments before the command name, in order. */
  env: EnvAssignment[];
  /** The command name and its arguments, each as the shell passes it. */
  argv: string[];
}

/** Characters that are literal outside quotes in every POSIX shell and bash. */
const PLAIN = /^[A-Za-z0-9_\-./,:+=@%]$/;

/** Characters that are literal inside double quotes (no `$`, backquote, `\` or `!`). */
const PLAIN_IN_DOUBLE = /^[^$`\\!"]$/;

/**
 * Words a shell does not look up on `PATH` as a program: reserved words and
 * builtins that act on the shell itself or run code (`eval`, `.`, `source`,
 * `trap`, `builtin`, …). A command starting with one of them is not read.
 */
const SHELL_WORDS = new Set([
  "!",
  ".",
  ":",
  "[[",
  "]]",
  "{",
  "}",
  "alias",
  "bg",
  "bind",
  "break",
  "builtin",
  "caller",
  "case",
  "cd",
  "compgen",
  "complete",
  "compopt",
  "continue",
  "coproc",
  "declare",
  "dirs",
  "disown",
  "do",
  "done",
  "elif",
  "else",
  "enable",
  "esac",
  "eval",
  "exit",
  "export",
  "fc",
  "fg",
  "fi",
  "for",
  "function",
  "getopts",
  "hash",
  "help",
  "history",
  "if",
  "in",
  "jobs",
  "let",
  "local",
  "logout",
  "mapfile",
  "popd",
  "pushd",
  "read",
  "readarray",
  "readonly",
  "return",
  "select",
  "set",
  "shift",
  "shopt",
  "source",
  "suspend",
  "then",
  "time",
  "times",
  "trap",
  "type",
  "typeset",
  "ulimit",
  "umask",
  "unalias",
  "unset",
  "until",
  "wait",
  "while",
]);

/** Whether a shell treats `word` as syntax or as a builtin of its own. */
export function isShellWord(word: string): boolean {
  return SHELL_WORDS.has(word);
}

interface Word {
  /** The word as the shell passes it. */
  text: string;
  /** How it was written (quotes and escapes kept). */
  raw: string;
}

/** The script's words, or undefined at anything that is not a literal word. */
function words(script: string): Word[] | undefined {
  const found: Word[] = [];
  let text = "";
  let raw = "";
  let inWord = false;
  let index = 0;
  const end = () => {
    if (inWord) found.push({ text, raw });
    text = "";
    raw = "";
    inWord = false;
  };
  while (index < script.length) {
    const char = script[index];
    if (char === " " || char === "\t") {
      end();
      index++;
    } else if (char === "'") {
      const close = script.indexOf("'", index + 1);
      if (close < 0) return undefined;
      text += script.slice(index + 1, close);
      raw += script.slice(index, close + 1);
      inWord = true;
      index = close + 1;
    } else if (char === '"') {
      const close = script.indexOf('"', index + 1);
      if (close < 0) return undefined;
      const inner = script.slice(index + 1, close);
      if (![...inner].every((c) => PLAIN_IN_DOUBLE.test(c))) return undefined;
      text += inner;
      raw += script.slice(index, close + 1);
      inWord = true;
      index = close + 1;
    } else if (char === "\\") {
      const next = script[index + 1];
      // A trailing backslash, or a line continuation: not one plain word.
      if (next === undefined || next === "\n") return undefined;
      text += next;
      raw += char + next;
      inWord = true;
      index += 2;
    } else if (PLAIN.test(char)) {
      text += char;
      raw += char;
      inWord = true;
      index++;
    } else return undefined;
  }
  end();
  return found;
}

/**
 * `script` as one simple command — leading `NAME=value` assignments, then
 * the command name and its arguments — or undefined when it is anything
 * else: more than one command (`;`, `&&`, `|`, a newline), an expansion
 * (`$`, backquotes, `~`, globs, braces), a redirection, a comment, a
 * reserved word or a shell builtin of {@linkcode isShellWord}, or no
 * command at all.
 */
export function parseSimpleCommand(
  script: string,
): SimpleCommand | undefined {
  const found = words(script);
  if (!found) return undefined;
  const env: EnvAssignment[] = [];
  let index = 0;
  for (; index < found.length; index++) {
    const assignment = /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(found[index].raw);
    if (!assignment) break;
    const name = assignment[1];
    env.push({ name, value: found[index].text.slice(name.length + 1) });
  }
  const argv = found.slice(index).map((word) => word.text);
  if (!argv.length || isShellWord(argv[0])) return undefined;
  return { env, argv };
}
