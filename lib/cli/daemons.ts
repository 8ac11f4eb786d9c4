/**
 * `runner daemons list` and `runner daemons unfence`: the hub's view of
 * daemons, from its `.pending` markers (`<data-dir>/relay`) and, when a
 * `runner serve` is reachable, from `GET /v1/daemons`. See `docs/daemon.md`.
 *
 * @module
 */

import { parseFlags, reportFailure, reportUsageError } from "./args.ts";
import { hubStateDir } from "../locations/daemon.ts";
import { RunnerError } from "../errors.ts";
import { FenceStore } from "../hub/fences.ts";
import { apiTokenPath, readApiTokenFile } from "./serve/api_token.ts";
import { defaultDataDir } from "../store/data_dir.ts";

const HELP = `Usage: runner daemons list [--data-dir DIR] [--json]
                            [--url http://127.0.0.1:8080 --api-token T]
       runner daemons unfence ID --yes [--data-dir DIR]
                            [--url http://127.0.0.1:8080 --api-token T]

list      fenced daemon IDs from the hub's markers in <data-dir>/relay, and,
          with --url, the live list of a running runner serve
unfence   lifts the fence on ID. Only do this after you have verified on the
          daemon's machine that no agent process of its jobs still runs.
          Without --yes it prints this warning and exits 2. A running
          runner serve keeps its fence in memory: give --url to clear it there.

--api-token defaults to $RUNNER_API_TOKEN, else the token runner serve keeps
in <data-dir>/api-token. See docs/daemon.md.
`;

const UNFENCE_WARNING = (daemonId: string) =>
  `A fence means the hub could not confirm that the agents of daemon ${daemonId} stopped.
Before unfencing, check on that machine that no agent process of its jobs still
runs (restarting \`runner daemon\` there kills the groups it recorded). Then run:
  runner daemons unfence ${daemonId} --yes`;

/** One daemon as `runner daemons list` shows it. */
interface DaemonRow {
  daemon_id: string;
  connected: boolean | null;
  fenced: boolean;
  active_jobs: string[];
  marker: boolean;
}

/** Runs `runner daemons …`; returns the exit code. */
export async function daemonsCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags({
      args,
      allowPositionals: true,
      options: {
        "data-dir": { type: "string" },
        json: { type: "boolean" },
        yes: { type: "boolean" },
        url: { type: "string" },
        "api-token": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    return reportUsageError(error, "daemons");
  }
  const { values, positionals } = parsed;
  const [action, ...rest] = positionals;
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const usage = usageProblem(action, rest);
  if (usage) {
    return reportUsageError(
      new RunnerError("config.invalid", usage),
      "daemons",
    );
  }
  if (action === "unfence" && !values.yes) {
    console.error(UNFENCE_WARNING(rest[0]));
    return 2;
  }
  try {
    const dataDir = values["data-dir"] ?? defaultDataDir();
    // Else the token runner serve keeps in the same data dir.
    const apiToken = values["api-token"] ?? Deno.env.get("RUNNER_API_TOKEN") ??
      (values.url ? await readApiTokenFile(apiTokenPath(dataDir)) : undefined);
    const stateDir = hubStateDir(dataDir);
    if (action === "unfence") {
      return await unfence(stateDir, rest[0], values.url, apiToken);
    }
    const rows = await listDaemons(stateDir, values.url, apiToken);
    console.log(values.json ? JSON.stringify(rows, null, 2) : table(rows));
    return 0;
  } catch (error) {
    return reportFailure(error, 1);
  }
}

/** What is wrong with the action and its arguments, if anything. */
function usageProblem(
  action: string | undefined,
  rest: string[],
): string | undefined {
  if (!action) return "give an action: list or unfence ID";
  if (action === "list") {
    return rest.length
      ? `list takes no arguments (got "${rest[0]}")`
      : undefined;
  }
  if (action === "unfence") {
    return rest.length === 1
      ? undefined
      : "unfence takes exactly one daemon ID";
  }
  return `unknown action "${action}" (list or unfence ID)`;
}

async function listDaemons(
  stateDir: string,
  url: string | undefined,
  apiToken: string | undefined,
): Promise<DaemonRow[]> {
  const rows = new Map<string, DaemonRow>();
  for (const daemonId of new FenceStore(stateDir).list()) {
    rows.set(daemonId, {
      daemon_id: daemonId,
      connected: null,
      fenced: true,
      active_jobs: [],
      marker: true,
    });
  }
  if (url) {
    const body = await callServe(url, "GET", "/v1/daemons", apiToken) as {
      daemons?: Array<Record<string, unknown>>;
    };
    for (const daemon of body.daemons ?? []) {
      const daemonId = String(daemon.daemon_id);
      rows.set(daemonId, {
        daemon_id: daemonId,
        connected: Boolean(daemon.connected),
        fenced: Boolean(daemon.fenced),
        active_jobs: Array.isArray(daemon.active_jobs)
          ? daemon.active_jobs.map(String)
          : [],
        marker: rows.get(daemonId)?.marker ?? false,
      });
    }
  }
  return [...rows.values()].sort((a, b) => a.daemon_id < b.daemon_id ? -1 : 1);
}

async function unfence(
  stateDir: string,
  daemonId: string,
  url: string | undefined,
  apiToken: string | undefined,
): Promise<number> {
  let wasFenced = await new FenceStore(stateDir).unfence(daemonId);
  if (url) {
    const body = await callServe(
      url,
      "POST",
      `/v1/daemons/${encodeURIComponent(daemonId)}/unfence`,
      apiToken,
    ) as { was_fenced?: boolean };
    wasFenced ||= Boolean(body.was_fenced);
  }
  if (!wasFenced) {
    console.error(`daemon ${daemonId} was not fenced; nothing to do.`);
    return 1;
  }
  console.log(
    `daemon ${daemonId} unfenced${
      url
        ? ""
        : " (marker removed; a running runner serve keeps its fence until restarted, or unfence with --url)"
    }.`,
  );
  return 0;
}

async function callServe(
  base: string,
  method: string,
  path: string,
  apiToken: string | undefined,
): Promise<unknown> {
  const target = new URL(path, base.endsWith("/") ? base : `${base}/`);
  let response: Response;
  try {
    response = await fetch(target, {
      method,
      headers: apiToken ? { authorization: `Bearer ${apiToken}` } : {},
    });
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      `cannot reach runner serve at ${base} (${
        error instanceof Error ? error.message : error
      }); check --url, or leave it out to use the markers only.`,
    );
  }
  const text = await response.text();
  if (!response.ok) {
    throw new RunnerError(
      response.status === 401
        ? "http.unauthorized"
        : response.status === 404
        ? "http.not_found"
        : "http.bad_request",
      `${method} ${target.pathname} answered ${response.status}: ${
        text.slice(0, 300)
      }${
        response.status === 401 ? " (give --api-token or RUNNER_API_TOKEN)" : ""
      }`,
    );
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new RunnerError(
      "http.bad_request",
      `${method} ${target.pathname} did not answer JSON; is ${base} a runner serve?`,
    );
  }
}

function table(rows: DaemonRow[]): string {
  if (!rows.length) return "No fenced or connected daemons.";
  const lines = [["DAEMON ID", "CONNECTED", "FENCED", "ACTIVE JOBS"]];
  for (const row of rows) {
    lines.push([
      row.daemon_id,
      row.connected === null ? "?" : row.connected ? "yes" : "no",
      row.fenced ? "yes" : "no",
      String(row.active_jobs.length),
    ]);
  }
  const widths = lines[0].map((_, column) =>
    Math.max(...lines.map((line) => line[column].length))
  );
  return lines.map((line) =>
    line.map((cell, column) => cell.padEnd(widths[column])).join("  ")
      .trimEnd()
  ).join("\n");
}
