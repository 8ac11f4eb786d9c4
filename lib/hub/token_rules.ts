/**
 * Rules for shared tokens: what a listener (the daemon hub, the HTTP API)
 * accepts, and what the daemon warns about. Length and variety checks cannot
 * prove randomness; they catch the common mistakes (short words, padded
 * values, tokens copied from our docs). See `docs/daemon.md`.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";

/** The shortest token a listener accepts. */
export const MIN_TOKEN_LENGTH = 32;

/** The fewest distinct characters a listener accepts. */
export const MIN_DISTINCT_CHARACTERS = 12;

/**
 * Tokens published in our docs, tests or the golden transcripts. Anyone can
 * read them, so no listener accepts them.
 */
export const PUBLISHED_TOKENS: ReadonlySet<string> = new Set([
  // The Python relay's golden transcripts.
  "golden-token-7f3a9c2e5b1d4f6a8c0e2b4d6f8a",
  // docs/daemon.md's example (clearly marked as one).
  "EXAMPLE-ONLY-do-not-use-4mX9qT2vL7pR8sK3wN6y",
  // tests/daemon/daemon_e2e_test.ts.
  "daemon-e2e-token-Jq7Xw2Lk9Vb4Nz6Tc1Rm8Hs3",
]);

const GENERATE_HINT =
  "Generate one with `runner token` (32 random bytes) and give it to both sides.";

/** What is wrong with `token`, or undefined when it passes every rule. */
export function tokenProblem(token: string): string | undefined {
  if (token !== token.trim()) {
    return "it has leading or trailing whitespace (a copy-paste mistake?)";
  }
  if (PUBLISHED_TOKENS.has(token)) {
    return "it is published in the runner's docs or tests";
  }
  if (token.length < MIN_TOKEN_LENGTH) {
    return `it is shorter than ${MIN_TOKEN_LENGTH} characters`;
  }
  if (new Set(token).size < MIN_DISTINCT_CHARACTERS) {
    return `it has fewer than ${MIN_DISTINCT_CHARACTERS} distinct characters`;
  }
  return undefined;
}

/** Whether `token` breaks a rule (the daemon warns, it never refuses). */
export function looksWeak(token: string): boolean {
  return tokenProblem(token) !== undefined;
}

/** Whether `host` only accepts connections from this machine. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.trim().replace(/^\[(.*)\]$/, "$1").toLowerCase();
  return bare === "localhost" || bare === "::1" ||
    /^127(\.\d{1,3}){3}$/.test(bare);
}

/** Options of {@linkcode checkListenerToken}. */
export interface ListenerTokenCheck {
  /** The token, if one was configured. */
  token?: string;
  /** The address the listener binds. */
  host: string;
  /** The flag that sets the token, named in messages (e.g. `--daemon-token`). */
  purpose: string;
}

/**
 * Refuses a listener's token (`config.invalid`): it is required off
 * loopback, and a given token must pass {@linkcode tokenProblem}. The token
 * itself never appears in the message.
 */
export function checkListenerToken(options: ListenerTokenCheck): void {
  const { token, host, purpose } = options;
  if (token === undefined || token === "") {
    if (isLoopbackHost(host)) return;
    throw new RunnerError(
      "config.invalid",
      `${purpose} is required when listening on ${host} (not loopback). ${GENERATE_HINT}`,
      { detail: { key: purpose } },
    );
  }
  const problem = tokenProblem(token);
  if (problem) {
    throw new RunnerError(
      "config.invalid",
      `${purpose} is refused: ${problem}. ${GENERATE_HINT}`,
      { detail: { key: purpose } },
    );
  }
}
