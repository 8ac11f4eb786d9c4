/**
 * `/acp`: the ACP remote transport (Streamable HTTP and WebSocket on one
 * path) on the SDK's `AcpServer`, behind the API token, the `Host`/`Origin`
 * rules and the body limit of the rest of the API. A WebSocket upgrade is
 * judged like any request; the listener finishes an accepted one
 * ({@linkcode takeAcpUpgrade}). See `docs/acp-endpoint.md`.
 *
 * @module
 */

import type { Hono } from "hono";
import {
  AcpServer,
  type PreparedWebSocketUpgrade,
} from "@agentclientprotocol/sdk/experimental/server";
import { RunnerError } from "../../errors.ts";
import { limitBody } from "../body_limit.ts";
import { errorResponse, type ServerContext } from "../context.ts";
import { routeAcpRequest, tagResponse } from "./connection_affinity.ts";
import { withHeldWriter } from "./held_writer.ts";
import { createAcpAgentShared, createRunnerAgent } from "./runner_agent.ts";
import { queryKeys, type TargetDescriber } from "./target.ts";

/** The endpoint's path. */
export const ACP_PATH = "/acp";

/** The header of a `/acp` answer that asks the listener to finish a WebSocket upgrade. */
export const ACP_UPGRADE_HEADER = "x-runner-acp-upgrade";

/** How long a prepared upgrade waits for its listener, in ms. */
const UPGRADE_WAIT_MS = 10_000;

/** Upgrades judged and prepared, waiting for their listener, by connection id. */
const preparedUpgrades = new Map<string, PreparedWebSocketUpgrade>();

/**
 * The prepared upgrade an `/acp` answer names (its {@linkcode ACP_UPGRADE_HEADER}),
 * taken once; undefined when the answer is not one.
 */
export function takeAcpUpgrade(
  response: Response,
): PreparedWebSocketUpgrade | undefined {
  const id = response.headers.get(ACP_UPGRADE_HEADER);
  if (!id) return undefined;
  const prepared = preparedUpgrades.get(id);
  preparedUpgrades.delete(id);
  return prepared;
}

/** What a target answers when nothing was learned of it (no describer). */
const NOTHING_LEARNED: TargetDescriber = () =>
  Promise.resolve({ source: "runner" });

/** Options of {@linkcode registerAcpRoutes}. */
export interface AcpRouteOptions {
  /** Learns what a target agent answers to `initialize` (default: nothing learned). */
  describe?: TargetDescriber;
  /** Aborted when the server stops: every `/acp` connection is closed. */
  stopping?: AbortSignal;
}

/** Adds `/acp`. */
export function registerAcpRoutes(
  app: Hono,
  ctx: ServerContext,
  options: AcpRouteOptions = {},
): void {
  const shared = createAcpAgentShared(ctx, options.describe ?? NOTHING_LEARNED);
  const server = new AcpServer({
    createAgent: () => withHeldWriter(createRunnerAgent(shared, {})),
    maxBufferedBytes: ctx.config.acpMaxBufferedMb * 1024 * 1024,
  });
  // Open SSE streams and WebSockets would hold the listener's drain.
  options.stopping?.addEventListener("abort", () => void server.close(), {
    once: true,
  });
  const { config } = ctx;
  app.use(
    ACP_PATH,
    limitBody(config.maxBodyMb * 1024 * 1024, () =>
      errorResponse(
        new RunnerError(
          "http.body_too_large",
          `The request body exceeds ${config.maxBodyMb} MiB (--max-body-mb). Send smaller attachments or links.`,
        ),
      )),
  );
  app.all(ACP_PATH, async (c) => {
    if (ctx.isShuttingDown() && c.req.method !== "DELETE") {
      throw new RunnerError(
        "runner.shutting_down",
        "The runner is shutting down; reconnect to the restarted service and load the session.",
      );
    }
    let request = c.req.raw;
    if (ctx.fleet) {
      const route = await routeAcpRequest(c, ctx.fleet);
      if (route.kind === "forwarded") return route.response;
      request = route.request;
    }
    const keys = queryKeys(request.url);
    const createAgent = () => withHeldWriter(createRunnerAgent(shared, keys));
    if (c.req.header("upgrade")?.toLowerCase() === "websocket") {
      const prepared = server.prepareWebSocketUpgrade({ createAgent });
      preparedUpgrades.set(prepared.connectionId, prepared);
      setTimeout(() => {
        if (preparedUpgrades.delete(prepared.connectionId)) prepared.reject();
      }, UPGRADE_WAIT_MS);
      return c.body(null, 200, {
        [ACP_UPGRADE_HEADER]: prepared.connectionId,
        "acp-connection-id": prepared.connectionId,
      });
    }
    const response = await server.handleRequest(request, { createAgent });
    return ctx.fleet
      ? tagResponse(response, ctx.fleet.fleet.replicaId)
      : response;
  });
}
