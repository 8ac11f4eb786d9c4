/**
 * `runner acp` without `--url`: a stdio ACP agent that fronts a local agent
 * directly, with no server. The same runner agent as `/acp`
 * (`server/acp/runner_agent.ts`) on an in-process run manager and store:
 * the operator's run defaults and policy are `runner serve`'s flags, the
 * sandbox is the run's, and every prompt is a run recorded in the data
 * directory (`runner serve` on the same data directory later shows them).
 * See `docs/acp-endpoint.md`.
 *
 * @module
 */

import { join } from "node:path";
import * as acp from "@agentclientprotocol/sdk";
import { createReaperRegistry } from "../agent/reaper.ts";
import { createAssetsHook } from "../assets/wiring.ts";
import { RunnerError } from "../errors.ts";
import { runnerLocations } from "../locations/runner_locations.ts";
import { createLogger } from "../log.ts";
import { createRunManager } from "../run/manager.ts";
import {
  createAcpAgentShared,
  createRunnerAgent,
} from "../server/acp/runner_agent.ts";
import { createServerContext } from "../server/app.ts";
import {
  loadServeConfig,
  serveSecrets,
} from "../server/config/serve_config.ts";
import { createMetrics } from "../server/metrics.ts";
import { openStore } from "../store/open.ts";
import { reportFailure } from "./args.ts";
import { createTargetDescriber } from "./serve/acp_targets.ts";

/**
 * Runs `runner acp` without `--url`: serves one ACP client on stdin/stdout
 * until it closes them; returns the exit code. `args` are `runner serve`'s
 * run-default and policy flags (listener and daemon-hub flags mean nothing
 * here).
 */
export async function acpLocalCommand(args: string[]): Promise<number> {
  let config;
  try {
    const loaded = await loadServeConfig(args);
    if (loaded === "help") return 2;
    config = loaded;
  } catch (error) {
    return reportFailure(error);
  }
  const secrets = serveSecrets(config);
  // stdout carries the protocol: every log line goes to stderr.
  const log = createLogger({
    secrets: () => secrets,
    level: config.logLevel,
    format: config.logFormat,
  });
  let store;
  try {
    store = await openStore({ dataDir: config.dataDir, log });
  } catch (error) {
    return reportFailure(error);
  }
  const assets = createAssetsHook({ log });
  const registry = createReaperRegistry(join(config.dataDir, "agents"));
  const manager = createRunManager({
    assets,
    locations: runnerLocations(undefined),
    store,
    registry,
    secrets,
    log,
  });
  const ctx = createServerContext({
    manager,
    store,
    config,
    metrics: createMetrics(),
    log,
    secrets,
  });
  const shared = createAcpAgentShared(ctx, createTargetDescriber({ registry }));
  const connection = createRunnerAgent(shared, {}).connect(
    acp.ndJsonStream(
      Deno.stdout.writable as WritableStream<Uint8Array>,
      Deno.stdin.readable,
    ),
  );
  await connection.closed;
  // The editor went away: nothing is left to see the runs, so none outlives it.
  await manager.shutdown(
    new RunnerError(
      "runner.shutting_down",
      "The ACP client closed runner acp; load the session again to continue.",
    ),
  );
  await assets.close();
  await store.close();
  return 0;
}
