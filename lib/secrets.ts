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
