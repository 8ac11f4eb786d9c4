// @ts-check
/// <reference lib="dom" />
/**
 * The console's calls of the runner's `/v1` API, with the bearer token this
 * tab keeps: a refused or missing token hands over to the sign-in form
 * (`onUnauthorized`) and rejects with `Error("unauthorized")`.
 *
 * @module
 */

import { rememberFirstPrompt, state } from "./state.js";

/** @type {(message: string) => void} */
let unauthorized = () => {};

/**
 * What the console does when the runner refuses the token: show the sign-in
 * form with this message.
 *
 * @param {(message: string) => void} handler
 */
export function onUnauthorized(handler) {
  unauthorized = handler;
}

/**
 * The request headers: JSON, the token, and `extra`.
 *
 * @param {Record<string, string>} [extra]
 * @returns {Record<string, string>}
 */
export function headers(extra) {
  /** @type {Record<string, string>} */
  const h = Object.assign({ "content-type": "application/json" }, extra || {});
  if (state.token) h.authorization = "Bearer " + state.token;
  return h;
}

/**
 * `fetch` with the token; a `401` rejects with `Error("unauthorized")`.
 *
 * @param {string} path
 * @param {RequestInit} [options]
 * @returns {Promise<Response>}
 */
export async function api(path, options) {
  const response = await fetch(
    path,
    Object.assign({ headers: headers() }, options || {}),
  );
  if (response.status === 401) {
    unauthorized(
      state.token
        ? "The runner refused this token. Check it and sign in again."
        : "This runner needs its API token.",
    );
    throw new Error("unauthorized");
  }
  return response;
}

/**
 * What a failed response says: the runner's error code and message.
 *
 * @param {Response} response
 * @returns {Promise<string>}
 */
export async function errorText(response) {
  try {
    const body = await response.json();
    return (body.error && (body.error.code + ": " + body.error.message)) ||
      response.statusText;
  } catch {
    return "HTTP " + response.status;
  }
}

/**
 * The message of whatever a promise rejected with.
 *
 * @param {unknown} failure
 * @returns {string}
 */
export function messageOf(failure) {
  return failure instanceof Error ? failure.message : String(failure);
}

/**
 * Whether a failure is the refused token, which the sign-in form shows.
 *
 * @param {unknown} failure
 */
export function isUnauthorized(failure) {
  return messageOf(failure) === "unauthorized";
}

/**
 * Whether a failure is an aborted request (another run opened meanwhile).
 *
 * @param {unknown} failure
 */
export function isAbort(failure) {
  return typeof failure === "object" && failure !== null && "name" in failure &&
    failure.name === "AbortError";
}

/** A new run id for a run this tab starts. */
export function newRunId() {
  return "console-" + crypto.randomUUID();
}

/**
 * Starts a run over the API; the console reads it through `GET …/events`.
 * Resolves to the run that takes the input: a new run, or the conversation's
 * active run it was steered into (`202`).
 *
 * @param {{ input: { text: string }, conversation_id?: string, config: Record<string, unknown> }} body
 * @param {string} runId
 * @returns {Promise<string>}
 */
export async function postRun(body, runId) {
  const response = await api("/v1/runs", {
    method: "POST",
    body: JSON.stringify(Object.assign({ run_id: runId }, body)),
  });
  if (!response.ok) throw new Error(await errorText(response));
  // Steered into the conversation's active run (202): its turn.started shows the text there.
  if (response.status === 202) return (await response.json()).run_id;
  rememberFirstPrompt(runId, body.input.text);
  response.body?.cancel().catch(() => {});
  return runId;
}
