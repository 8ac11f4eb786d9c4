// @ts-check
/// <reference lib="dom" />
/**
 * Downloading the open run's transcript (`docs/transcripts.md`): its
 * conversation's when it has one, else the run's, as Markdown or JSON. The
 * API needs the bearer header, so a plain link cannot fetch it: the file is
 * fetched with the token and handed to the browser as a blob.
 *
 * @module
 */

import { api, errorText, isUnauthorized, messageOf } from "./api.js";
import { $ } from "./dom.js";
import { state } from "./state.js";

/**
 * The transcript path of the open run: its conversation's, or its own.
 *
 * @returns {{ path: string, name: string } | null}
 */
function transcriptOfOpenRun() {
  const run = state.run;
  if (!run) return null;
  return run.conversation_id
    ? {
      path: "/v1/conversations/" + encodeURIComponent(run.conversation_id) +
        "/transcript",
      name: "conversation-" + run.conversation_id,
    }
    : {
      path: "/v1/runs/" + encodeURIComponent(run.run_id) + "/transcript",
      name: "run-" + run.run_id,
    };
}

/**
 * Fetches the open run's transcript in `format` and saves it as a file.
 *
 * @param {"md" | "json"} format
 */
export async function downloadTranscript(format) {
  const target = transcriptOfOpenRun();
  if (!target) return;
  $("download-error").textContent = "";
  try {
    const response = await api(target.path + "?format=" + format);
    if (!response.ok) {
      $("download-error").textContent = "The transcript could not be loaded: " +
        await errorText(response);
      return;
    }
    const url = URL.createObjectURL(await response.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = target.name.replace(/[^A-Za-z0-9._-]/g, "_") +
      ".transcript." + format;
    document.body.append(link);
    link.click();
    link.remove();
    // The click has started the download; the URL is no longer needed.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (failure) {
    if (isUnauthorized(failure)) return;
    $("download-error").textContent = "The transcript could not be loaded (" +
      messageOf(failure) + ").";
  }
}
