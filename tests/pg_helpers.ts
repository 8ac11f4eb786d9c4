/**
 * A private PostgreSQL 15 cluster for one test file: `initdb` in a temporary
 * directory and `pg_ctl` on a free 127.0.0.1 port, run as the unprivileged
 * `postgres` OS user when the tests run as root. That user cannot enter a
 * private `TMPDIR` (mode 0700, as `mktemp -d` makes it), so as root the
 * cluster lives in a directory of its own under the system's `/tmp`, owned
 * by `postgres`. Each test takes a fresh database from it; the file stops the
 * cluster and removes its directory at the end (`Deno.test.afterAll`, and
 * when the module unloads).
 *
 * @module
 */

import { join } from "node:path";
import postgres from "postgres";
import { openStore } from "../lib/store/open.ts";
import type { RunStore } from "../lib/store/types.ts";
import { tempDir } from "./helpers.ts";
import { freePort } from "./helpers.ts";

const PG_BIN = Deno.env.get("RUNNER_TEST_PG_BIN") ??
  "/usr/lib/postgresql/15/bin";

/** A running private cluster. */
export interface PgCluster {
  /** The port it listens on (127.0.0.1). */
  port: number;
  /** A URL of a new, empty database. */
  newDatabase(): Promise<string>;
  /** Stops the cluster (`fast`: connections cut, data kept); start() brings it back. */
  stop(): Promise<void>;
  /** Starts the stopped cluster again on the same port. */
  start(): Promise<void>;
  /** Stops the cluster and removes its directory. */
  remove(): Promise<void>;
}

/** Runs a PostgreSQL binary as the `postgres` user (when root); throws with its output on failure. */
async function pgCommand(name: string, args: string[]): Promise<void> {
  const asRoot = Deno.uid() === 0;
  const command = asRoot
    ? new Deno.Command("runuser", {
      args: ["-u", "postgres", "--", join(PG_BIN, name), ...args],
    })
    : new Deno.Command(join(PG_BIN, name), { args });
  const output = await command.output();
  if (!output.success) {
    const text = new TextDecoder().decode(output.stderr) +
      new TextDecoder().decode(output.stdout);
    throw new Error(`${name} failed: ${text}`);
  }
}

/** Where the system keeps temporary files whatever `TMPDIR` says. */
const SYSTEM_TMP = "/tmp";

/**
 * The cluster's directory: as root, a new directory under {@linkcode
 * SYSTEM_TMP} handed to the `postgres` user (removed by `remove()`, or when
 * the module unloads); otherwise a {@linkcode tempDir}.
 */
async function clusterDir(): Promise<string> {
  if (Deno.uid() !== 0) return tempDir("runner-pg-");
  const dir = Deno.makeTempDirSync({ dir: SYSTEM_TMP, prefix: "runner-pg-" });
  globalThis.addEventListener("unload", () => {
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch { /* already removed */ }
  });
  const chown = await new Deno.Command("chown", {
    args: ["postgres:postgres", dir],
  }).output();
  if (!chown.success) throw new Error("chown of the cluster dir failed");
  return dir;
}

/** Initialises and starts a private cluster in a new temporary directory. */
export async function startPgCluster(): Promise<PgCluster> {
  const dir = await clusterDir();
  const data = join(dir, "data");
  await pgCommand("initdb", [
    "-D",
    data,
    "-U",
    "runner",
    "-A",
    "trust",
    "--no-sync",
    "-E",
    "UTF8",
  ]);
  const port = freePort();
  const options = [
    `-p ${port}`,
    "-c listen_addresses=127.0.0.1",
    `-c unix_socket_directories=${dir}`,
    "-c fsync=off",
    "-c synchronous_commit=off",
    "-c full_page_writes=off",
    "-c max_connections=200",
  ].join(" ");
  const start = () =>
    pgCommand("pg_ctl", [
      "-D",
      data,
      "-o",
      options,
      "-l",
      join(dir, "log"),
      "-w",
      "start",
    ]);
  await start();
  let databases = 0;
  return {
    port,
    async newDatabase() {
      const name = `t${++databases}_${crypto.randomUUID().slice(0, 8)}`;
      const admin = postgres(
        `postgres://runner@127.0.0.1:${port}/postgres`,
        { onnotice: () => {}, max: 1 },
      );
      try {
        await admin.unsafe(`CREATE DATABASE ${name}`);
      } finally {
        await admin.end();
      }
      return `postgres://runner@127.0.0.1:${port}/${name}`;
    },
    stop: () => pgCommand("pg_ctl", ["-D", data, "-m", "fast", "stop"]),
    start,
    async remove() {
      await pgCommand("pg_ctl", ["-D", data, "-m", "immediate", "stop"])
        .catch(() => {});
      await Deno.remove(dir, { recursive: true });
    },
  };
}

/**
 * Starts one cluster for the calling test file and stops it after its last
 * test; returns an accessor (the cluster starts before the first test).
 */
export function clusterForThisFile(): () => PgCluster {
  let cluster: PgCluster | undefined;
  Deno.test.beforeAll(async () => {
    cluster = await startPgCluster();
  });
  Deno.test.afterAll(async () => {
    await cluster?.remove();
  });
  return () => {
    if (!cluster) throw new Error("the PostgreSQL cluster did not start");
    return cluster;
  };
}

/**
 * `Deno.test` for a test that talks to PostgreSQL: the driver keeps its
 * sockets and timers past the test, so the op and resource sanitizers are off.
 */
export function pgTest(name: string, fn: () => Promise<void>): void {
  Deno.test({ name, fn, sanitizeOps: false, sanitizeResources: false });
}

/** Options of {@linkcode openReplicaStore}. */
export interface ReplicaStoreOptions {
  /** The replica's lease (default a minute). */
  leaseMs?: number;
  /** Hold a run's events until they are stored (the store's option). */
  holdEvents?: boolean;
}

/** Opens the store of replica `replicaId` on the PostgreSQL database `url`. */
export function openReplicaStore(
  url: string,
  replicaId: string,
  options: ReplicaStoreOptions = {},
): Promise<RunStore> {
  return openStore({
    dataDir: "/nonexistent",
    shared: {
      url,
      replicaId,
      advertiseUrl: `http://127.0.0.1:1/${replicaId}`,
      leaseMs: options.leaseMs ?? 60_000,
      holdEvents: options.holdEvents,
    },
  });
}

/**
 * Opens the stores of replicas `ids` on the database `url`, runs `body` with
 * them (in the order of `ids`), and closes them after, the last opened first.
 */
export async function withReplicaStores<T>(
  url: string,
  ids: string[],
  body: (stores: RunStore[]) => Promise<T>,
): Promise<T> {
  const stores: RunStore[] = [];
  try {
    for (const id of ids) stores.push(await openReplicaStore(url, id));
    return await body(stores);
  } finally {
    for (const store of stores.toReversed()) await store.close();
  }
}
