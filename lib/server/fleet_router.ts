/**
 * Conversation affinity over HTTP: in a fleet, a request about a
 * conversation, run or daemon that another live replica owns is forwarded
 * to that replica (its `--advertise-url`), carrying the shared
 * `--cluster-token`; the owner's answer, streams included, is passed back
 * unchanged. A forwarded request is always served where it lands, so a
 * request is forwarded at most once. See `docs/fleet.md`.
 *
 * @module
 */

import type { Context } from "hono";
import { RunnerError } from "../errors.ts";
import type { FleetStore, ReplicaRef } from "../store/fleet.ts";
import { createHash, timingSafeEqual } from "node:crypto";

/** The header carrying the cluster token between replicas. */
export const CLUSTER_TOKEN_HEADER = "x-runner-cluster-token";
/** The header naming the replica that forwarded a request. */
export const FORWARDED_FROM_HEADER = "x-runner-forwarded-from";

/**
 * Request headers not passed on to the owner. The browser-only ones (the
 * forwarding replica already checked `Origin` against its own host; the
 * owner's host differs) are dropped: the owner trusts that check.
 */
const DROPPED_REQUEST_HEADERS = [
  "host",
  "content-length",
  "connection",
  "origin",
  "referer",
  "cookie",
  "sec-fetch-site",
  "sec-fetch-mode",
  "sec-fetch-dest",
  CLUSTER_TOKEN_HEADER,
  FORWARDED_FROM_HEADER,
];
/** Response headers not passed back to the client. */
const DROPPED_RESPONSE_HEADERS = [
  "content-length",
  "content-encoding",
  "transfer-encoding",
  "connection",
];

/** Routes requests to the replica that owns their conversation, run or daemon. */
export interface FleetRouter {
  /** The fleet's shared state. */
  fleet: FleetStore;
  /** Whether the request comes from another replica (a valid cluster token). */
  isForwarded(c: Context): boolean;
  /**
   * Claims the conversation for this replica, or forwards the request to
   * its live owner; `force` takes the conversation (runs on a daemon held
   * here). Undefined: serve it here.
   */
  forConversation(
    c: Context,
    conversationId: string | undefined,
    options?: { force?: boolean },
  ): Promise<Response | undefined>;
  /** Forwards a request about a run active on another live replica; undefined: serve it here. */
  forRun(c: Context, runId: string): Promise<Response | undefined>;
  /**
   * Forwards a request to the conversation's owner when that is another live
   * replica, without claiming the conversation; undefined: serve it here.
   */
  toConversationOwner(
    c: Context,
    conversationId: string,
  ): Promise<Response | undefined>;
  /**
   * Forwards a run for a daemon whose socket another live replica holds;
   * refuses a daemon fenced anywhere in the fleet; undefined: serve it here.
   */
  forDaemon(c: Context, daemonId: string): Promise<Response | undefined>;
  /**
   * Forwards a request to replica `replicaId` when it is another live
   * replica; undefined: it is this one, or it is not alive (its lease
   * expired, or it never was).
   */
  toReplica(c: Context, replicaId: string): Promise<Response | undefined>;
  /**
   * Sends the request to every other live replica (none when it was itself
   * forwarded); a replica that does not answer is left out of the answers.
   */
  toOtherReplicas(
    c: Context,
  ): Promise<{ replicaId: string; response: Response }[]>;
  /**
   * Cancels run `runId` where it is active when that is another live replica,
   * as a forwarded `POST /v1/runs/:id/cancel` (answered once the run ended
   * there); false: it is not active on another live replica.
   */
  cancelOnOwner(runId: string): Promise<boolean>;
}

/** Options of {@linkcode createFleetRouter}. */
export interface FleetRouterOptions {
  /** The fleet's shared state. */
  fleet: FleetStore;
  /** The secret replicas share. */
  clusterToken: string;
  /** Structured log. */
  log: (entry: Record<string, unknown>) => void;
  /** Aborted when this replica stops: ends the requests it forwarded. */
  stopping?: AbortSignal;
}

/** Compares two strings in time independent of where they differ. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

/** A fleet lookup whose driver failure becomes `store.unavailable`. */
export async function fleetLookup<T>(query: Promise<T>): Promise<T> {
  try {
    return await query;
  } catch (error) {
    if (error instanceof RunnerError) throw error;
    throw new RunnerError(
      "store.unavailable",
      `The fleet's database did not answer (${
        error instanceof Error ? error.message : error
      }); retry shortly, or check PostgreSQL at --store.`,
      { cause: error },
    );
  }
}

/** Makes the router of one replica. */
export function createFleetRouter(options: FleetRouterOptions): FleetRouter {
  const { fleet, clusterToken } = options;
  const isForwarded = (c: Context) => {
    const given = c.req.header(CLUSTER_TOKEN_HEADER);
    return given !== undefined && sameSecret(given, clusterToken);
  };
  const forward = (c: Context, owner: ReplicaRef) =>
    forwardRequest(c.req, { owner, ...options });
  return {
    fleet,
    isForwarded,
    async forConversation(c, conversationId, claim = {}) {
      if (!conversationId || isForwarded(c)) {
        if (conversationId) {
          await fleetLookup(fleet.claimConversation(conversationId, claim));
        }
        return undefined;
      }
      const owner = await fleetLookup(
        fleet.claimConversation(conversationId, claim),
      );
      return owner.self ? undefined : await forward(c, owner);
    },
    async forRun(c, runId) {
      if (isForwarded(c)) return undefined;
      const owner = await fleetLookup(fleet.activeRunOwner(runId));
      if (!owner || owner.self || !owner.alive) return undefined;
      return await forward(c, owner);
    },
    async toConversationOwner(c, conversationId) {
      if (isForwarded(c)) return undefined;
      const owner = await fleetLookup(fleet.conversationOwner(conversationId));
      if (!owner || owner.self || !owner.alive) return undefined;
      return await forward(c, owner);
    },
    async forDaemon(c, daemonId) {
      if (isForwarded(c)) return undefined;
      const holder = await fleetLookup(fleet.daemonHolder(daemonId));
      if (holder && !holder.self) return await forward(c, holder);
      if ((await fleetLookup(fleet.listFences())).includes(daemonId)) {
        throw new RunnerError(
          "agent_runtime.daemon_fenced",
          `daemon ${daemonId} fenced: cleanup unconfirmed; stop remote jobs before restarting this worker`,
        );
      }
      return undefined;
    },
    async toReplica(c, replicaId) {
      if (isForwarded(c) || replicaId === fleet.replicaId) return undefined;
      const replica = (await fleetLookup(fleet.liveReplicas())).find((live) =>
        live.replicaId === replicaId
      );
      return replica ? await forward(c, replica) : undefined;
    },
    async toOtherReplicas(c) {
      if (isForwarded(c)) return [];
      const others = (await fleetLookup(fleet.liveReplicas())).filter((
        replica,
      ) => !replica.self);
      const answers = await Promise.all(others.map(async (replica) => {
        try {
          return {
            replicaId: replica.replicaId,
            response: await forward(c, replica),
          };
        } catch (error) {
          if (!(error instanceof RunnerError)) throw error;
          options.log({
            msg: "replica skipped",
            replica_id: replica.replicaId,
          });
          return undefined;
        }
      }));
      return answers.filter((answer) => answer !== undefined);
    },
    cancelOnOwner: (runId) => cancelOnOwner(runId, options),
  };
}

/** {@linkcode FleetRouter.cancelOnOwner}. */
async function cancelOnOwner(
  runId: string,
  options: FleetRouterOptions,
): Promise<boolean> {
  const owner = await fleetLookup(options.fleet.activeRunOwner(runId));
  if (!owner || owner.self || !owner.alive) return false;
  const raw = new Request(
    // Only the path is sent on, to the owner's address.
    `http://replica.invalid/v1/runs/${encodeURIComponent(runId)}/cancel`,
    { method: "POST" },
  );
  const answer = await forwardRequest(
    { url: raw.url, method: "POST", raw, text: () => Promise.resolve("") },
    { owner, ...options },
  );
  await answer.body?.cancel();
  return answer.ok;
}

/**
 * In a fleet: forwards a request about a run that is not active here but is
 * active on another live replica (cancel, input, events, permission answers);
 * undefined: serve it here.
 */
export async function routeRunRequest(
  c: Context,
  routing: { fleet?: FleetRouter; manager: { get(runId: string): unknown } },
  runId: string,
): Promise<Response | undefined> {
  if (!routing.fleet || routing.manager.get(runId)) return undefined;
  return await routing.fleet.forRun(c, runId);
}

/** What forwarding reads of a request: a client's (Hono's), or one a replica makes itself. */
interface OutgoingRequest {
  url: string;
  method: string;
  raw: Request;
  /** The body (Hono's keeps a body a route has already read). */
  text(): Promise<string>;
}

/** Sends the request to `owner` and passes its answer back as it streams. */
async function forwardRequest(
  req: OutgoingRequest,
  { owner, fleet, clusterToken, log, stopping }: FleetRouterOptions & {
    owner: ReplicaRef;
  },
): Promise<Response> {
  const incoming = new URL(req.url);
  const target = new URL(
    incoming.pathname + incoming.search,
    owner.url.endsWith("/") ? owner.url : `${owner.url}/`,
  );
  const headers = new Headers(req.raw.headers);
  for (const name of DROPPED_REQUEST_HEADERS) headers.delete(name);
  headers.set(CLUSTER_TOKEN_HEADER, clusterToken);
  headers.set(FORWARDED_FROM_HEADER, fleet.replicaId);
  const method = req.method;
  const body = method === "GET" || method === "HEAD"
    ? undefined
    : await req.text();
  let answer: Response;
  // An owner whose lease lapses before it answers (paused, hung) is reported
  // unreachable; once it answered, its stream may last.
  const silent = new AbortController();
  const timer = setInterval(() => {
    fleet.replicaAlive(owner.replicaId).then(
      (alive) => alive || silent.abort(),
      () => {},
    );
  }, fleet.leaseMs / 3);
  try {
    answer = await fetch(target, {
      method,
      headers,
      body,
      signal: AbortSignal.any([
        req.raw.signal,
        silent.signal,
        ...(stopping ? [stopping] : []),
      ]),
    });
  } catch (error) {
    throw new RunnerError(
      "runner.replica_unreachable",
      `Replica ${owner.replicaId} owns this request but did not answer at ${owner.url} (${
        error instanceof Error ? error.message : error
      }); retry shortly (another replica takes over once its lease expires).`,
    );
  } finally {
    clearInterval(timer);
  }
  log({
    msg: "request forwarded",
    method,
    path: incoming.pathname,
    replica_id: owner.replicaId,
    status: answer.status,
  });
  const passed = new Headers(answer.headers);
  for (const name of DROPPED_RESPONSE_HEADERS) passed.delete(name);
  passed.set("x-runner-replica", owner.replicaId);
  return new Response(answer.body, { status: answer.status, headers: passed });
}
