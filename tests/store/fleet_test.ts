import assert from "node:assert/strict";
import { join } from "node:path";
import postgres from "postgres";
import type { RunEvent } from "../../lib/events.ts";
import { agentPids, assertAgentGone, isAlive } from "../helpers.ts";
import { clusterForThisFile, pgTest } from "../pg_helpers.ts";
import {
  apiFetch,
  assertStatus,
  deltaText,
  fixtureConfig,
  openGate,
  postJson,
  readSse,
  readUntil,
  tempDir,
  terminals,
} from "../serve_test_helpers.ts";
import {
  CLUSTER_TOKEN,
  eventually,
  gatedFixture,
  postMessage,
  type Replica,
  startReplica,
  withTwoReplicas,
} from "../fleet_helpers.ts";
import { listAgents, recordByProcess } from "../warm_helpers.ts";

const cluster = clusterForThisFile();

/** Two replicas on a fresh database; stops them after `body`. */
async function withFleet(
  body: (a: Replica, b: Replica) => Promise<void>,
  extraArgs: string[] = [],
): Promise<void> {
  await withTwoReplicas(await cluster().newDatabase(), body, extraArgs);
}

/** Waits until `replica`'s `/healthz` reports `status`. */
async function healthzSays(
  replica: Replica,
  status: "ok" | "degraded",
  what: string,
): Promise<void> {
  await eventually(async () => {
    const body = await (await apiFetch(`${replica.url}/healthz`)).json();
    return body.status === status ? true : undefined;
  }, what);
}

/**
 * Replica `a` alone on a fresh database (named `url`); afterwards the
 * database runs again (a step may have stopped it) and the replica stops. A
 * failure carries the replica's log.
 */
async function withLoneReplica(
  body: (a: Replica, url: string) => Promise<void>,
): Promise<void> {
  const url = await cluster().newDatabase();
  const a = await startReplica(url, "a");
  try {
    await body(a, url);
  } catch (error) {
    throw new Error(`${error}\nreplica log:\n${a.logs()}`);
  } finally {
    await cluster().start().catch(() => {}); // already running unless a step failed
    await a.stop();
  }
}

/** Stops the database until `replica` reports degraded, then starts it again until it reports ok. */
async function outage(replica: Replica): Promise<void> {
  await cluster().stop();
  await healthzSays(
    replica,
    "degraded",
    "the replica to notice the lost database",
  );
  await cluster().start();
  await healthzSays(replica, "ok", "the replica to recover");
}

/** Kills whatever of a fixture's processes (from `--pid-file`) is still alive. */
function killAgent(pidFile: string): void {
  for (const pid of agentPids(pidFile)) {
    if (isAlive(pid)) Deno.kill(pid, "SIGKILL");
  }
}

pgTest(
  "a run started on A is streamed, steered, resumed and cancelled from B",
  async () => {
    await withFleet(async (a, b) => {
      const { gate, pidFile, config } = await gatedFixture();
      const body = {
        run_id: "live-1",
        conversation_id: "conv-live",
        input: { text: "first" },
        config,
      };
      const started = await postJson(`${a.url}/v1/runs`, body);
      const runId = started.headers.get("x-run-id")!;
      assert.equal(runId, "live-1");
      const fromA = readSse(started.body!);
      await readUntil(
        fromA,
        [],
        (message) => message.event === "message.delta",
      );

      const streamed = await apiFetch(`${b.url}/v1/runs/${runId}/events`);
      assert.equal(streamed.status, 200);
      assert.equal(streamed.headers.get("x-runner-replica"), "a");
      const fromB = readSse(streamed.body!);
      const seenOnB: RunEvent[] = [];
      await readUntil(fromB, seenOnB, (m) => m.event === "message.delta");

      const queued = await postJson(`${b.url}/v1/runs/${runId}/input`, {
        input: { text: "second" },
      });
      assert.equal(queued.status, 202);
      assert.deepEqual(await queued.json(), { run_id: runId, queued: true });
      await openGate(gate);
      await readUntil(
        fromB,
        seenOnB,
        (m) => m.event === "message.delta" && m.data.includes("second"),
      );
      assert.match(deltaText(seenOnB), /echo: first \(turn 1\)/);

      // Last-Event-ID is exact from any replica.
      const after = seenOnB[1].sequence!;
      const resumed = await apiFetch(`${b.url}/v1/runs/${runId}/events`, {
        headers: { "last-event-id": String(after) },
      });
      const replayed: RunEvent[] = [];
      const replay = readSse(resumed.body!);
      await readUntil(
        replay,
        replayed,
        (m) => Number(m.id) === seenOnB.at(-1)!.sequence,
      );
      assert.deepEqual(
        replayed.map((event) => event.sequence),
        seenOnB.slice(2).map((event) => event.sequence),
      );
      await replay.return(undefined);

      // A retried POST of the run (same run_id) on B re-attaches at its owner.
      const retried = await postJson(`${b.url}/v1/runs`, body, {
        "last-event-id": String(after),
      });
      assert.equal(retried.status, 200);
      assert.equal(retried.headers.get("x-runner-replica"), "a");
      assert.equal(retried.headers.get("x-run-id"), runId);
      const reattached = readSse(retried.body!);
      const again: RunEvent[] = [];
      await readUntil(reattached, again, () => true);
      assert.equal(again[0].sequence, after + 1);
      await reattached.return(undefined);

      const cancelled = await postJson(`${b.url}/v1/runs/${runId}/cancel`, {});
      assert.equal(cancelled.status, 200);
      assert.equal((await cancelled.json()).status, "cancelled");
      for await (const message of fromB) seenOnB.push(JSON.parse(message.data));
      const ends = terminals(seenOnB);
      assert.equal(ends.length, 1);
      assert.equal(ends[0].data.code, "run.cancelled");
      for await (const _ of fromA) { /* drain */ }
      assertAgentGone(pidFile);
    });
  },
);

pgTest(
  "a conversation's second run posted to B is forwarded to A and reuses the session",
  async () => {
    await withFleet(async (a, b) => {
      const dir = await tempDir();
      const config = fixtureConfig(join(dir, "ws"), [
        "--resume",
        "--load-session",
        "--state-dir",
        join(dir, "state"),
      ]);
      const first = await postMessage(a.url, {
        conversation: "conv-affinity",
        text: "one",
        config,
      });
      assert.equal((await first.json()).message, "echo: one (turn 1)");
      const second = await postMessage(b.url, {
        conversation: "conv-affinity",
        text: "two",
        config,
      });
      assert.equal(second.headers.get("x-runner-replica"), "a");
      const body = await second.json();
      assert.equal(body.status, "completed");
      assert.equal(body.message, "echo: two (turn 2)");
      assert.ok(
        !body.events.some((event: RunEvent) => event.type === "state.updated"),
        "the session was reused, not replaced",
      );
      await a.waitForLog((entry) =>
        entry.msg === "run started" && entry.run_id === body.run_id
      );
      const onB =
        await (await apiFetch(`${b.url}/v1/conversations/conv-affinity`))
          .json();
      assert.equal(onB.sessions.length, 1);
    });
  },
);

pgTest(
  "a permission answer posted to B reaches A's run; the warm agent stays on A, and deleting the conversation on B stops it",
  async () => {
    await withFleet(async (a, b) => {
      const dir = await tempDir();
      const record = join(dir, "record.jsonl");
      const started = await postJson(`${a.url}/v1/runs`, {
        conversation_id: "conv-ask",
        input: { text: "write the file" },
        config: {
          ...fixtureConfig(join(dir, "ws"), [
            "--permission",
            "--record",
            record,
          ]),
          "permission-decision": "ask",
        },
      });
      const events: RunEvent[] = [];
      const stream = readSse(started.body!);
      await readUntil(
        stream,
        events,
        (m) => m.event === "permission.requested",
      );
      const requested = events.at(-1)!;
      const answered = await postJson(
        `${b.url}/v1/runs/${requested.run_id}/permissions/${requested.data.request_id}`,
        { option_id: "allow_once" },
      );
      assert.equal(answered.status, 200);
      assert.equal(answered.headers.get("x-runner-replica"), "a");
      assert.deepEqual(await answered.json(), {
        run_id: requested.run_id,
        request_id: requested.data.request_id,
        answered: true,
      });
      for await (const message of stream) events.push(JSON.parse(message.data));
      const decided = events.find((e) => e.type === "permission.decided")!;
      assert.equal(decided.data.decision, "allow_once");
      assert.equal(decided.data.by, "caller");
      assert.equal(terminals(events)[0].type, "run.completed");

      // The conversation's agent idles on A; every replica lists it.
      const [warm] = await listAgents(a);
      assert.equal(warm.conversation_id, "conv-ask");
      assert.equal(warm.replica_id, "a");
      assert.deepEqual(await listAgents(b), [warm]);
      const [agent] = recordByProcess(record);
      assert.ok(isAlive(agent.pid), "the warm agent idles on A");

      const deleted = await apiFetch(`${b.url}/v1/conversations/conv-ask`, {
        method: "DELETE",
      });
      assert.equal(deleted.headers.get("x-runner-replica"), "a");
      assert.deepEqual(await deleted.json(), {
        conversation_id: "conv-ask",
        deleted_sessions: 1,
      });
      assert.deepEqual(await listAgents(a), []);
      assert.ok(!isAlive(agent.pid), "deleting on B stopped A's warm agent");
    });
  },
);

pgTest(
  "B lists A's warm agents and stopping one on B stops it on A",
  async () => {
    await withFleet(async (a, b) => {
      const dir = await tempDir();
      const record = join(dir, "record.jsonl");
      const done = await postJson(`${a.url}/v1/runs`, {
        conversation_id: "conv-warm",
        input: { text: "hi" },
        config: fixtureConfig(join(dir, "ws"), ["--record", record]),
        stream: false,
      });
      await assertStatus(done, 200);
      const listed = await listAgents(b);
      assert.deepEqual(
        listed.map((agent) => [agent.conversation_id, agent.replica_id]),
        [["conv-warm", "a"]],
      );
      const [agent] = recordByProcess(record);
      const stopped = await apiFetch(
        `${b.url}/v1/agents/${listed[0].agent_id}`,
        {
          method: "DELETE",
        },
      );
      assert.equal(stopped.status, 200);
      assert.equal(stopped.headers.get("x-runner-replica"), "a");
      assert.deepEqual(await stopped.json(), {
        agent_id: listed[0].agent_id,
        stopped: true,
      });
      assert.deepEqual(await listAgents(a), []);
      assert.ok(!isAlive(agent.pid), "stopping on B stopped A's warm agent");
      const again = await apiFetch(`${b.url}/v1/agents/${listed[0].agent_id}`, {
        method: "DELETE",
      });
      await assertStatus(again, 404);
    });
  },
);

pgTest(
  "kill -9 of A mid-run: B fails the run once with runner.replica_lost and the conversation goes on on B",
  async () => {
    await withFleet(async (a, b) => {
      const { dir, pidFile, config } = await gatedFixture();
      const started = await postJson(`${a.url}/v1/runs`, {
        conversation_id: "conv-lost",
        input: { text: "doomed" },
        config,
      });
      const runId = started.headers.get("x-run-id")!;
      const stream = readSse(started.body!);
      await readUntil(
        stream,
        [],
        (message) => message.event === "message.delta",
      );
      a.child.kill("SIGKILL");
      await a.child.status;
      await stream.return(undefined).catch(() => {}); // A died mid-stream
      killAgent(pidFile); // nothing is left to reap A's agent in this test

      const failed = await eventually(async () => {
        const response = await apiFetch(`${b.url}/v1/runs/${runId}`);
        if (response.status !== 200) {
          await response.body?.cancel();
          return undefined;
        }
        const run = await response.json();
        return run.status === "active" ? undefined : run;
      }, "B to fail A's run");
      assert.equal(failed.status, "failed");
      assert.equal(failed.code, "runner.replica_lost");
      const ends = terminals(failed.events);
      assert.equal(ends.length, 1);
      assert.equal(ends[0].data.code, "runner.replica_lost");
      assert.equal(ends[0].data.retryable, true);

      const next = await postMessage(b.url, {
        conversation: "conv-lost",
        text: "again",
        config: fixtureConfig(join(dir, "ws")),
      });
      assert.equal(next.headers.get("x-runner-replica"), null);
      const body = await next.json();
      assert.equal(body.status, "completed", JSON.stringify(body));
      const sweeps = b.logs().split("\n").filter((line) =>
        line.includes("failed runs of a lost replica") && line.includes(runId)
      );
      assert.equal(sweeps.length, 1);
    });
  },
);

pgTest(
  "without its database a replica reports degraded, refuses runs with store.unavailable, and recovers",
  async () => {
    await withLoneReplica(async (a) => {
      const dir = await tempDir();
      await cluster().stop();
      const health = await eventually(async () => {
        const response = await apiFetch(`${a.url}/healthz`);
        const body = await response.json();
        return body.status === "degraded" ? [response.status, body] : undefined;
      }, "the replica to notice the lost database");
      assert.equal(health[0], 503);
      const refused = await postJson(`${a.url}/v1/runs`, {
        conversation_id: "conv-down",
        input: { text: "hi" },
        config: fixtureConfig(join(dir, "ws")),
      });
      assert.equal(refused.status, 503);
      const error = (await refused.json()).error;
      assert.equal(error.code, "store.unavailable");
      assert.equal(error.retryable, true);
      await cluster().start();
      await healthzSays(a, "ok", "the replica to recover");
    });
  },
);

pgTest(
  "a replica busy with queries outlives its database going away, again and again",
  async () => {
    await withLoneReplica(async (a) => {
      for (let round = 0; round < 5; round++) {
        // Listing runs keeps queries in flight on every pooled connection.
        let listing = true;
        const readers = Array.from({ length: 8 }, async () => {
          while (listing) {
            const response = await apiFetch(`${a.url}/v1/runs?limit=5`);
            await response.body?.cancel();
          }
        });
        await outage(a);
        listing = false;
        await Promise.all(readers);
      }
      const listed = await apiFetch(`${a.url}/v1/runs`);
      await assertStatus(listed, 200);
    });
  },
);

pgTest(
  "a replica whose transactions are in flight when its database goes away outlives it, again and again",
  async () => {
    await withLoneReplica(async (a, url) => {
      const probe = postgres(url, { max: 2, onnotice: () => {} });
      try {
        for (let round = 0; round < 3; round++) {
          // Holding the replica's lease row keeps its next lease renewal (a
          // transaction) waiting inside the database when the database stops.
          const holder = await probe.reserve();
          await holder`BEGIN`;
          await holder`SELECT 1 FROM replicas WHERE replica_id = 'a' FOR UPDATE`;
          await eventually(async () => {
            const [row] = await probe`SELECT count(*)::int AS waiting
          FROM pg_stat_activity
          WHERE application_name = 'runner a' AND wait_event_type = 'Lock'`;
            return row.waiting > 0 ? true : undefined;
          }, "a transaction of the replica to wait on its lease row");
          await outage(a);
        }
        const listed = await apiFetch(`${a.url}/v1/runs`);
        await assertStatus(listed, 200);
      } finally {
        await probe.end({ timeout: 1 });
      }
    });
  },
);

pgTest(
  "behind --api-token, only the exact cluster token stands in for the bearer token",
  async () => {
    const apiToken = "fleet-api-token-Wd5Kq8Zm3Xr7Lt2Nv6Pc";
    const url = await cluster().newDatabase();
    const a = await startReplica(url, "a", ["--api-token", apiToken]);
    try {
      const status = async (headers: Record<string, string>) => {
        const answer = await fetch(`${a.url}/v1/runs`, { headers });
        await answer.body?.cancel();
        return answer.status;
      };
      const header = "x-runner-cluster-token";
      for (
        const value of [
          "",
          "x",
          CLUSTER_TOKEN.slice(0, -1),
          `${CLUSTER_TOKEN}x`,
          CLUSTER_TOKEN.toUpperCase(),
          apiToken,
        ]
      ) {
        assert.equal(await status({ [header]: value }), 401, value);
      }
      assert.equal(await status({ [header]: CLUSTER_TOKEN }), 200);
      assert.equal(await status({ authorization: `Bearer ${apiToken}` }), 200);
    } finally {
      await a.stop();
    }
  },
);
