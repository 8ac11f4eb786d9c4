// @ts-check
/// <reference lib="dom" />
/**
 * The open run's events, read from `GET /v1/runs/{id}/events` (SSE) until
 * its terminal event: a stream that breaks (network, proxy, replica
 * restart) is read again from the last event shown (`after=<id>`).
 *
 * @module
 */

import { api, errorText, headers, isUnauthorized, messageOf } from "./api.js";
import { $ } from "./dom.js";
import { finished, runError, setStatus } from "./run_status.js";
import { state } from "./state.js";
import { showEvent } from "./transcript.js";

/**
 * Shows a stream's events from where it is; says whether the run's terminal
 * event came.
 *
 * @param {Response} response
 * @param {AbortController} stream
 * @param {{ after: number }} seen
 * @returns {Promise<boolean>}
 */
async function readEvents(response, stream, seen) {
  if (!response.body) return false;
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({
      value: undefined,
      done: true,
    }));
    if (done || state.stream !== stream) return false;
    buffer += value;
    let start = 0;
    let end;
    while ((end = buffer.indexOf("\n\n", start)) >= 0) {
      const block = buffer.slice(start, end);
      start = end + 2;
      const lines = block.split("\n");
      const data = lines.filter((l) => l.startsWith("data:")).map((l) =>
        l.slice(5).trimStart()
      ).join("\n");
      const id = lines.find((l) => l.startsWith("id:"));
      if (!data) continue;
      const event = JSON.parse(data);
      const sequence = id ? Number(id.slice(3).trim()) : event.sequence;
      if (Number.isInteger(sequence)) {
        if (sequence <= seen.after) continue;
        seen.after = sequence;
      }
      const ended = showEvent(event);
      if (ended) {
        finished(ended);
        reader.cancel().catch(() => {});
        return true;
      }
    }
    buffer = buffer.slice(start);
  }
}

/**
 * Waits `ms`, or less if `signal` aborts.
 *
 * @param {number} ms
 * @param {AbortSignal} signal
 * @returns {Promise<void>}
 */
function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/**
 * Follows the run's events until its terminal event, reading a broken
 * stream again from the last event shown.
 *
 * @param {string} runId
 * @param {AbortController} stream
 */
export async function followEvents(runId, stream) {
  const seen = { after: 0 };
  let delay = 500;
  const path = "/v1/runs/" + encodeURIComponent(runId) + "/events?after=";
  for (;;) {
    let problem;
    try {
      const response = await api(path + seen.after, {
        signal: stream.signal,
        headers: headers({ accept: "text/event-stream" }),
      });
      if (state.stream !== stream) return;
      if (response.status === 204) {
        await settleStatus(runId, stream);
        return;
      }
      if (response.status === 200) {
        $("run-stream").textContent = "";
        const before = seen.after;
        if (await readEvents(response, stream, seen)) return;
        if (seen.after > before) delay = 500;
        problem = "the live stream was cut";
      } else {
        problem = await errorText(response);
        if (response.status < 500) {
          runError("The run's events could not be read: " + problem);
          return;
        }
      }
    } catch (failure) {
      if (state.stream !== stream || isUnauthorized(failure)) return;
      problem = messageOf(failure);
    }
    if (state.stream !== stream) return;
    $("run-stream").textContent = "Reconnecting (" + problem + ")…";
    await pause(delay, stream.signal);
    delay = Math.min(delay * 2, 10000);
    if (state.stream !== stream) return;
  }
}

/**
 * The run ended with every event already shown: its record says how.
 *
 * @param {string} runId
 * @param {AbortController} stream
 */
async function settleStatus(runId, stream) {
  $("run-stream").textContent = "";
  const response = await api("/v1/runs/" + encodeURIComponent(runId), {
    signal: stream.signal,
  });
  if (state.stream !== stream || !response.ok) return;
  const run = await response.json();
  if (state.stream === stream && run.status !== "active") {
    setStatus(run.status, true);
  }
}
