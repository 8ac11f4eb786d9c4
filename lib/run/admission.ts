/**
 * Admission of a new run: whether it may start at all, decided before
 * anything is launched or stored.
 *
 * @module
 */

import { RunnerError } from "../errors.ts";
import type { RunStore } from "../store/types.ts";
import type { ActiveRuns } from "./active_runs.ts";
import { checkRunInput } from "./prompt.ts";
import type { RunLocations } from "./location.ts";
import type { RunRequest } from "./request.ts";

/** Options for {@linkcode admitRun}. */
export interface AdmissionOptions {
  /** The run asked for. */
  request: RunRequest;
  /** Refuse (`http.too_many_runs`) when this many runs are already active. */
  maxActive?: number;
  /** The store, for run ids of past runs. */
  store: RunStore;
  /** The runs already active. */
  active: ActiveRuns;
  /** Where runs go, by `location`. */
  locations: RunLocations;
}

/** What admitting a run decided. */
export interface Admission {
  /** The new run's id. */
  runId: string;
}

function runIdTaken(runId: string): RunnerError {
  return new RunnerError(
    "config.invalid",
    `run_id ${runId} already exists; use a new run_id.`,
  );
}

/**
 * Rejects with `config.invalid` when the request names a run id that is
 * already active, starting or stored: such a request is never a new run, nor
 * a follow-up.
 */
export async function assertRunIdUnused(
  runId: string | undefined,
  { store, active }: Pick<AdmissionOptions, "store" | "active">,
): Promise<void> {
  if (!runId) return;
  if (active.byId.has(runId) || active.starting.has(runId)) {
    throw runIdTaken(runId);
  }
  if (await store.getRun(runId)) throw runIdTaken(runId);
}

/**
 * Checks that a new run may start: a valid input, an unused run id, an
 * available location and room under `maxActive`; rejects with why not.
 * An admitted run holds its place in `active.starting` until the caller
 * tracks it (or gives up) and deletes it from there.
 */
export async function admitRun(options: AdmissionOptions): Promise<Admission> {
  const { request, active } = options;
  checkRunInput(request.input, request.config);
  const runId = request.runId ?? crypto.randomUUID();
  if (active.byId.has(runId) || active.starting.has(runId)) {
    throw runIdTaken(runId);
  }
  checkLocationAndRoom(options);
  active.starting.add(runId);
  try {
    if (request.runId && await options.store.getRun(runId)) {
      throw runIdTaken(runId);
    }
  } catch (error) {
    active.starting.delete(runId);
    throw error;
  }
  return { runId };
}

/** Checks that the run's location exists and there is room. */
function checkLocationAndRoom(options: AdmissionOptions): void {
  const { request, maxActive, active } = options;
  const location = request.config.location;
  if (!options.locations[location]) {
    throw new RunnerError(
      "config.invalid",
      `location=${location} is not available in this runner${
        location === "daemon"
          ? " (start runner serve with --daemon-enabled)"
          : ""
      }.`,
    );
  }
  if (
    maxActive !== undefined &&
    active.byId.size + active.starting.size >= maxActive
  ) {
    throw new RunnerError(
      "http.too_many_runs",
      `The runner already runs ${maxActive} runs (--max-concurrent-runs). Retry shortly.`,
    );
  }
}
