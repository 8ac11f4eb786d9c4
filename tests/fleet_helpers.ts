/**
 * Helpers for the fleet tests: two (or more) real `runner serve` replicas
 * sharing one database of the file's private PostgreSQL cluster.
 *
 * @module
 */

import { join } from "node:path";
import {
  fixtureConfig,
  makeFifo,
  postJson,
  type ServeProcess,
  startServe,
  tempDir,
} from "./serve_test_helpers.ts";
export { freePort } from "./helpers.ts";
import { freePort } from "./helpers.ts";

/** The cluster token of the test fleets. */
export const CLUSTER_TOKEN = "fleet-test-cluster-Hq7Ws2Lp9Xv4Nb6Rt1Mz";

/** The API token every replica of the test fleets accepts (a fleet's replicas share one). */
export const FLEET_API_TOKEN = "fleet-test-api-token-Zr4Kp8Wd2Qm6Xs1Vn9Tb";

/**
 * The replicas' lease: short, so a killed replica's runs and conversations
 * are taken over in seconds, but long enough that a replica on a loaded
 * machine, stalled for a second, keeps its lease (renewed every third).
 */
export const LEASE_SECONDS = "3";

/** A running replica. */
export interface Replica extends ServeProcess {
  /** Its replica id. */
  replicaId: string;
  /** Its data directory. */
  dataDir: string;
}

/** Where a replica listens and keeps its data, so it can be started again there. */
export interface ReplicaSlot {
  /** Its replica id (empty: the default id). */
  replicaId: string;
  port: number;
  dataDir: string;
}

/** A fresh slot: a free port and a new data directory. */
export async function newSlot(replicaId: string): Promise<ReplicaSlot> {
  return {
    replicaId,
    port: freePort(),
    dataDir: join(await tempDir(), "data"),
  };
}

/** Starts the replica of `slot` on database `storeUrl` and waits until it joined the fleet. */
export async function startReplicaAt(
  storeUrl: string,
  slot: ReplicaSlot,
  extraArgs: string[] = [],
): Promise<Replica> {
  const { replicaId, port, dataDir } = slot;
  const serve = await startServe({
    dataDir,
    args: [
      "--allow-custom-commands",
      "--port",
      String(port),
      "--store",
      storeUrl,
      ...(replicaId ? ["--replica-id", replicaId] : []),
      "--advertise-url",
      `http://127.0.0.1:${port}`,
      "--cluster-token",
      CLUSTER_TOKEN,
      "--api-token",
      FLEET_API_TOKEN,
      "--lease-seconds",
      LEASE_SECONDS,
      ...extraArgs,
    ],
  });
  const joined = await serve.waitForLog((entry) =>
    entry.msg === "joined the fleet"
  );
  return { ...serve, replicaId: String(joined.replica_id), dataDir };
}

/** Starts replica `replicaId` (empty: the default id) of the fleet on database `storeUrl`. */
export async function startReplica(
  storeUrl: string,
  replicaId: string,
  extraArgs: string[] = [],
): Promise<Replica> {
  return startReplicaAt(storeUrl, await newSlot(replicaId), extraArgs);
}

/**
 * Polls `check` (one HTTP round trip each) until it returns a value; fails
 * after `limitMs` (a safety net for a loaded machine, not a timing check).
 */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  limitMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** Replicas `a` and `b` on the database at `storeUrl`; stops them after `body`. */
export async function withTwoReplicas(
  storeUrl: string,
  body: (a: Replica, b: Replica) => Promise<void>,
  extraArgs: string[] = [],
): Promise<void> {
  const a = await startReplica(storeUrl, "a", extraArgs);
  const b = await startReplica(storeUrl, "b", extraArgs);
  try {
    await body(a, b);
  } finally {
    await b.stop();
    await a.stop();
  }
}

/** A fixture run's files in a fresh directory and its config. */
export interface GatedFixture {
  dir: string;
  /** The FIFO the agent reads a line from before answering each prompt. */
  gate: string;
  /** Where the agent writes its, its grandchild's and that one's pids. */
  pidFile: string;
  /** The run config: workspace `dir/ws`, the gate, the pid file, a grandchild. */
  config: Record<string, unknown>;
}

/** A fixture agent that waits on a gate after its first delta, with a grandchild. */
export async function gatedFixture(): Promise<GatedFixture> {
  const dir = await tempDir();
  const gate = join(dir, "gate");
  const pidFile = join(dir, "pids.json");
  await makeFifo(gate);
  const config = fixtureConfig(join(dir, "ws"), [
    "--gate-fifo",
    gate,
    "--pid-file",
    pidFile,
    "--grandchild",
  ]);
  return { dir, gate, pidFile, config };
}

/** One message of a conversation, for {@linkcode postMessage}. */
export interface ConversationMessage {
  conversation: string;
  text: string;
  config: unknown;
}

/** Posts `message` to the replica (or balancer) at `url`, answered whole (`stream=false`); `headers` go along. */
export function postMessage(
  url: string,
  message: ConversationMessage,
  headers: Record<string, string> = {},
): Promise<Response> {
  return postJson(`${url}/v1/runs?stream=false`, {
    conversation_id: message.conversation,
    input: { text: message.text },
    config: message.config,
  }, headers);
}
