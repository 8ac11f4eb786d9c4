/**
 * Redaction of secrets (tokens, env-json values) from text that may reach
 * logs, events or error messages.
 *
 * @module
 */

const MIN_SECRET_LENGTH = 4;

/** Replaces every occurrence of each secret in `text` with `[REDACTED]`. */
export function redactSecrets(text: string, secrets: Iterable<string>): string {
  let result = text;
  const sorted = [...secrets]
    .filter((secret) => secret.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  for (const secret of sorted) {
    if (result.includes(secret)) {
      result = result.split(secret).join("[REDACTED]");
    }
  }
  return result;
}

/** Redacts text that arrives in pieces (a stream of agent chunks). */
export interface StreamRedactor {
  /**
   * Takes the next piece and returns the redacted text that is safe to show
   * now. Only a tail that could be the start of a secret is held back (at
   * most the longest secret's length − 1 characters, or a whole secret that
   * overlaps such a tail) until the next piece or {@linkcode end}.
   */
  push(text: string): string;
  /** Returns the held-back tail, redacted: the text has ended. */
  end(): string;
}

/**
 * A {@linkcode StreamRedactor} for `secrets`: the concatenation of what it
 * returns equals `redactSecrets` of the whole text, however the text was cut
 * into pieces. Without secrets (of redactable length) nothing is held back.
 */
export function createStreamRedactor(
  secrets: Iterable<string>,
): StreamRedactor {
  const list = [...new Set(secrets)]
    .filter((secret) => secret.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  if (!list.length) return { push: (text) => text, end: () => "" };
  let held = "";
  return {
    push(text) {
      const buffer = held + text;
      const cut = safeCut(buffer, list);
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
  const before = buffer.charCodeAt(cut - 1);
  if (cut > 0 && before >= 0xd800 && before <= 0xdbff) cut -= 1;
  return cut;
}

/** Redacts secrets from every string inside a JSON-like value. */
export function redactDeep<T>(value: T, secrets: Iterable<string>): T {
  const list = [...secrets].filter((s) => s.length >= MIN_SECRET_LENGTH);
  if (!list.length) return value;
  const walk = (item: unknown): unknown => {
    if (typeof item === "string") return redactSecrets(item, list);
    if (Array.isArray(item)) return item.map(walk);
    if (item && typeof item === "object") {
      return Object.fromEntries(
        Object.entries(item).map(([key, inner]) => [key, walk(inner)]),
      );
    }
    return item;
  };
  return walk(value) as T;
}

const SECRET_NAME =
  /(TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)/i;

/** env-json values at least this long are secrets whatever their name. */
const LONG_VALUE = 8;

/**
 * The secrets of an environment: env-json values (the user put them there for
 * the agent only) that are long enough to be credentials or whose names look
 * secret, plus runner variables whose names look secret. Short values under
 * harmless names (`MODE=echo`, `DEBUG=true`) are not treated as secrets, so
 * they cannot blank out ordinary words in the agent's answer.
 */
export function secretsOf(options: {
  envJson?: Record<string, string>;
  environment?: Record<string, string>;
  extra?: Array<string | undefined>;
}): string[] {
  const found = new Set<string>();
  for (const [name, value] of Object.entries(options.envJson ?? {})) {
    if (value.length >= LONG_VALUE || SECRET_NAME.test(name)) found.add(value);
  }
  for (const [name, value] of Object.entries(options.environment ?? {})) {
    if (SECRET_NAME.test(name)) found.add(value);
  }
  for (const value of options.extra ?? []) if (value) found.add(value);
  return [...found].filter((s) => s.length >= MIN_SECRET_LENGTH);
}
