/**
 * The signature on callback-source requests: HMAC-SHA256 over the timestamp
 * and body with the run's secret. The runner signs; a receiver verifies.
 *
 * @module
 */

import { createHmac, timingSafeEqual } from "node:crypto";

/** The header carrying the signature (`sha256=<hex>`). */
export const CALLBACK_SIGNATURE_HEADER = "X-Runner-Signature";

/** The header carrying the signing time, in unix seconds. */
export const CALLBACK_TIMESTAMP_HEADER = "X-Runner-Timestamp";

/** How far a receiver accepts a timestamp from its own clock by default. */
export const DEFAULT_CALLBACK_TOLERANCE_SECONDS = 300;

/**
 * Signs a callback request: `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`,
 * `timestamp` being the `X-Runner-Timestamp` value (unix seconds).
 */
export function signCallbackBody(
  secret: string,
  timestamp: string | number,
  body: string,
): string {
  return `sha256=${
    createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")
  }`;
}

/** What a callback receiver checks with {@linkcode verifyCallbackSignature}. */
export interface CallbackVerification {
  /** The run's secret (the one given in `assets.callback.secret`). */
  secret: string;
  /** The exact request body. */
  body: string;
  /** The `X-Runner-Timestamp` header (null when absent). */
  timestamp: string | null;
  /** The `X-Runner-Signature` header (null when absent). */
  signature: string | null;
  /** Accepted clock difference in seconds; default 300. */
  toleranceSeconds?: number;
  /** The receiver's clock, in ms since the epoch. */
  now?: () => number;
}

/**
 * Whether a callback request is authentic and fresh: the signature matches
 * the secret, timestamp and body, and the timestamp is within tolerance.
 */
export function verifyCallbackSignature(check: CallbackVerification): boolean {
  const { timestamp, signature } = check;
  if (!timestamp || !/^\d+$/.test(timestamp) || !signature) return false;
  const nowSeconds = Math.floor((check.now ?? Date.now)() / 1000);
  const tolerance = check.toleranceSeconds ??
    DEFAULT_CALLBACK_TOLERANCE_SECONDS;
  if (Math.abs(nowSeconds - Number(timestamp)) > tolerance) return false;
  const expected = new TextEncoder().encode(
    signCallbackBody(check.secret, timestamp, check.body),
  );
  const given = new TextEncoder().encode(signature);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
