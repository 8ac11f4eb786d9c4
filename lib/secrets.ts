/**
 * Redaction of secrets (tokens, env-json values) from text that may reach
 * logs, events or error messages.
 *
 * @module
 */

const MIN_SECRET_LENGTH = 4;

/**
 * Replaces every occurrence of each secret in `text` with `[REDACTED]`.
 * Occurrences that overlap (one secret's end is another's start) are
 * replaced as one, so neither leaves a piece of the other.
 */
export function redactSecrets(text: string, secrets: Iterable<string>): string {
  const found: [number, number][] = [];
  for (const secret of new Set(secrets)) {
    if (secret.length < MIN_SECRET_LENGTH) continue;
    for (let at = text.indexOf(secret); at >= 0;) {
      found.push([at, at + secret.length]);
      at = text.indexOf(secret, at + 1);
    }
  }
  if (!found.length) return text;
  found.sort((a, b) => a[0] - b[0]);
  let result = "";
  let shown = 0;
  for (let i = 0; i < found.length;) {
    const start = found[i][0];
    let end = found[i][1];
    for (i++; i < found.length && found[i][0] < end; i++) {
      end = Math.max(end, found[i][1]);
    }
    result += text.slice(shown, start) + "[REDACTED]";
    shown = end;
  }
  return result + text.slice(shown);
}

/**
 * Redacts the tail of a longer text, whose beginning was cut off: as
 * {@linkcode redactSecrets}, and also the end of a secret that the cut left
 * at its very start (the longest such end, however short).
 */
export function redactTail(text: string, secrets: Iterable<string>): string {
  const list = [...secrets].filter((secret) =>
    secret.length >= MIN_SECRET_LENGTH
  );
  const redacted = redactSecrets(text, list);
  let cutEnd = 0;
  for (const secret of list) {
    for (let length = secret.length - 1; length > cutEnd; length--) {
      if (redacted.startsWith(secret.slice(-length))) {
        cutEnd = length;
        break;
      }
    }
  }
  return cutEnd ? "[REDACTED]" + redacted.slice(cutEnd) : redacted;
}

/** Redacts text that arrives in pieces (a stream of agent chunks). */
export interface StreamRedactor {
  /**
   * Takes the next piece and returns the redacted text that is safe to show
   * now. Only a tail that could be the start of a secret is held back (at
   * most the longest secret's length − 1 characters, or a whole secret that
   * overlaps such a tail) until the next piece or {@linkcode end}; and never
   * half a surrogate pair, so each piece returned is well-formed Unicode.
   */
  push(text: string): string;
  /** Returns the held-back tail, redacted: the text has ended. */
  end(): string;
}

/**
 * A {@linkcode StreamRedactor} for `secrets`: the concatenation of what it
 * returns equals `redactSecrets` of the whole text, however the text was cut
 * into pieces. Without secrets (of redactable length) only the first half of
 * a surrogate pair cut from its second is held back.
 */
export function createStreamRedactor(
  secrets: Iterable<string>,
): StreamRedactor {
  const list = [...new Set(secrets)]
    .filter((secret) => secret.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  let held = "";
  return {
    push(text) {
      const buffer = held + text;
      const cut = list.length
        ? safeCut(buffer, list)
        : pairSafe(buffer, buffer.length);
      held = buffer.slice(cut);
      return redactSecrets(buffer.slice(0, cut), list);
    },
    end() {
      const rest = held;
      held = "";
      return redactSecrets(rest, list);
    },
  };
}

/**
 * Where `buffer` may be cut: before the earliest tail that is the start of a
 * secret (it may continue in the next piece), and never inside a secret
 * occurring whole, nor inside a surrogate pair.
 */
function safeCut(buffer: string, secrets: string[]): number {
  let cut = buffer.length;
  for (const secret of secrets) {
    const from = Math.max(0, buffer.length - secret.length + 1);
    for (let at = buffer.indexOf(secret[0], from); at >= 0 && at < cut;) {
      if (secret.startsWith(buffer.slice(at))) {
        cut = at;
        break;
      }
      at = buffer.indexOf(secret[0], at + 1);
    }
  }
  for (let moved = true; moved && cut > 0;) {
    moved = false;
    for (const secret of secrets) {
      const at = buffer.indexOf(secret, Math.max(0, cut - secret.length + 1));
      if (at >= 0 && at < cut) {
        cut = at;
        moved = true;
      }
    }
  }
  return pairSafe(buffer, cut);
}

/** `cut`, or one less when it would split a surrogate pair. */
function pairSafe(buffer: string, cut: number): number {
  const before = buffer.charCodeAt(cut - 1);
  return cut > 0 && before >= 0xd800 && before <= 0xdbff ? cut - 1 : cut;
}

/**
 * Redacts secrets from every string inside a JSON-like value, the names of
 * its fields included.
 */
export function redactDeep<T>(value: T, secrets: Iterable<string>): T {
  const list = [...secrets].filter((s) => s.length >= MIN_SECRET_LENGTH);
  if (!list.length) return value;
  const walk = (item: unknown): unknown => {
    if (typeof item === "string") return redactSecrets(item, list);
    if (Array.isArray(item)) return item.map(walk);
    if (item && typeof item === "object") {
      return Object.fromEntries(
        Object.entries(item).map((
          [key, inner],
        ) => [redactSecrets(key, list), walk(inner)]),
      );
    }
    return item;
  };
  return walk(value) as T;
}

/**
 * Name fragments that make a variable a secret (matched anywhere in the name,
 * any case): `OPENAI_API_KEY`, `GH_TOKEN`, `DB_PASSWORD`, `SSH_PASSPHRASE`, …
 */
export const SECRET_NAME_PARTS: readonly string[] = [
  "KEY",
  "TOKEN",
  "SECRET",
  "PASSWORD",
  "PASSWD",
  "PASSPHRASE",
  "AUTH",
  "CREDENTIAL",
  "PRIVATE",
  "COOKIE",
  "SESSION",
];

/**
 * Names whose values are never secrets, even when listed by the operator:
 * they hold paths and words that appear in ordinary answers.
 */
export const NEVER_SECRET_NAMES: readonly string[] = [
  "HOME",
  "PATH",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TERM",
  "TMPDIR",
  "TMP",
  "TEMP",
  "PWD",
];

/** Values that are switches, not credentials. */
const PLAIN_VALUES = new Set(["true", "false", "null", "none"]);

/**
 * Whether the variable `name` holds a secret: its name contains one of
 * {@linkcode SECRET_NAME_PARTS} or the operator listed it, and it is not one
 * of {@linkcode NEVER_SECRET_NAMES} (nor `LC_*`).
 */
export function isSecretName(
  name: string,
  operatorNames: readonly string[] = [],
): boolean {
  if (NEVER_SECRET_NAMES.includes(name) || name.startsWith("LC_")) {
    return false;
  }
  if (operatorNames.includes(name)) return true;
  const upper = name.toUpperCase();
  return SECRET_NAME_PARTS.some((part) => upper.includes(part));
}

/**
 * Whether a value names an existing file or directory on this machine (such
 * as `GOOGLE_APPLICATION_CREDENTIALS=/home/me/key.json`): a path, not a
 * secret. Only existing paths count, so a credential that merely starts with
 * `/` (base64 may) is still redacted.
 */
function isExistingPath(value: string, home: string | undefined): boolean {
  const path = value.startsWith("~/") && home
    ? `${home}${value.slice(1)}`
    : value;
  if (!path.startsWith("/")) return false;
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Options for {@linkcode secretsOf}. */
export interface SecretsOfOptions {
  /** The user's env-json (it goes to the agent only). */
  envJson?: Record<string, string>;
  /** The runner's own environment (presets pass some of it to the agent). */
  environment?: Record<string, string>;
  /** Names the operator declared secret (`secret-env-names`). */
  secretNames?: readonly string[];
  /** The runner's own tokens and other values that are always secret. */
  extra?: Array<string | undefined>;
}

/**
 * The values to redact: env-json and runner variables whose names are
 * secret by {@linkcode isSecretName} (unless the value is an existing path
 * or a plain switch such as `true`), plus `extra`. Values under other names
 * (`HOME=/home/me`, `MODE=echo`, `REGION=europe-west1`) are not secrets, so
 * they cannot blank out paths and words in the agent's answer.
 */
export function secretsOf(options: SecretsOfOptions): string[] {
  const found = new Set<string>();
  const home = options.environment?.HOME ?? options.envJson?.HOME;
  for (
    const [name, value] of [
      ...Object.entries(options.envJson ?? {}),
      ...Object.entries(options.environment ?? {}),
    ]
  ) {
    if (!isSecretName(name, options.secretNames)) continue;
    if (PLAIN_VALUES.has(value.trim().toLowerCase())) continue;
    if (isExistingPath(value, home)) continue;
    found.add(value);
  }
  for (const value of options.extra ?? []) if (value) found.add(value);
  return [...found].filter((s) => s.length >= MIN_SECRET_LENGTH);
}
