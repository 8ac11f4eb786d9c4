import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { agentPids, isAlive } from "../helpers.ts";
import { clusterForThisFile, pgTest } from "../pg_helpers.ts";
import postgres from "postgres";
import {
  apiFetch,
  deltaText,
  fixtureConfig,
  gateIn,
  openGate,
  postJson,
  readSse,
  readUntil,
  tempDir,
  terminals,
} from "../serve_test_helpers.ts";
import {
  eventually,
  gatedFixture,
  postMessage,
  type Replica,
  startReplica,
  withTwoReplicas,
} from "../fleet_helpers.ts";

const cluster = clusterForThisFile();

/** The run as `replica` answers it, once it is no longer active. */
function endedRun(replica: Replica, runId: string) {
  return eventually(async () => {
    const response = await apiFetch(`${replica.url}/v1/runs/${runId}`);
    if (response.status !== 200) {
      await response.body?.cancel();
      return undefined;
    }
    const run = await response.json();
    return run.status === "active" ? undefined : run;
  }, `run ${runId} to end`);
}

/** A run on `replica` whose agent waits on a gate after its first delta. */
async function gatedRun(replica: Replica, conversationId: string) {
  const { dir, gate, pidFile, config } = await gatedFixture();
  const started = await postJson(`${replica.url}/v1/runs`, {
    conversation_id: conversationId,
    input: { text: "long" },
    config,
  });
  const runId = started.headers.get("x-run-id")!;
  const stream = readSse(started.body!);
  const seen: RunEvent[] = [];
  await readUntil(stream, seen, (message) => message.event === "message.delta");
  return { dir, gate, pidFile, runId, stream, seen };
}

pgTest(
  "a replica paused past its lease writes nothing after the fleet ended its run, and its client sees runner.replica_lost once",
  async () => {
    const url = await cluster().newDatabase();
    // A lease of 3 s, not the fleet tests' 1 s: on a loaded machine a 1 s lease
    // can lapse before the first delta, without any pause.
    const lease = ["--lease-seconds", "3"];
    const a = await startReplica(url, "a", lease);
    const b = await startReplica(url, "b", lease);
    try {
      const run = await gatedRun(a, "conv-paused");
      a.child.kill("SIGSTOP");
      let ended;
      try {
        ended = await endedRun(b, run.runId);
      } finally {
        // The agent (not paused) finishes its turn while A sleeps; then A wakes.
        await openGate(run.gate);
        a.child.kill("SIGCONT");
      }
      assert.equal(ended.status, "failed");
      assert.equal(ended.code, "runner.replica_lost");

      // A's own client: exactly one terminal, the fleet's verdict, never completed.
      for await (const message of run.stream) {
        run.seen.push(JSON.parse(message.data));
      }
      const ends = terminals(run.seen);
      assert.deepEqual(ends.map((event) => event.data.code), [
        "runner.replica_lost",
      ]);
      assert.equal(run.seen.at(-1)!.type, "run.failed");

      await a.waitForLog((entry) =>
        entry.msg === "run finished" && entry.run_id === run.runId
      );
      await a.waitForLog((entry) => entry.msg === "rejoined the fleet");
      // The store holds one terminal event, the last one, from either replica.
      for (const replica of [a, b]) {
        const stored =
          await (await apiFetch(`${replica.url}/v1/runs/${run.runId}`))
            .json();
        assert.equal(stored.status, "failed");
        assert.equal(stored.code, "runner.replica_lost");
        const storedEnds = terminals(stored.events);
        assert.equal(storedEnds.length, 1, JSON.stringify(stored.events));
        assert.equal(stored.events.at(-1).type, "run.failed");
        assert.ok(
          !stored.events.some((event: RunEvent) =>
            event.type === "message.completed"
          ),
          "nothing A wrote after waking reached the store",
        );
      }
      await eventually(
        () =>
          Promise.resolve(
            agentPids(run.pidFile).some(isAlive) ? undefined : true,
          ),
        "the woken replica to stop the run's agent",
      );

      // The conversation goes on, on the woken replica too.
      const next = await postMessage(a.url, {
        conversation: "conv-paused",
        text: "again",
        config: fixtureConfig(join(run.dir, "ws")),
      });
      const body = await next.json();
      assert.equal(body.status, "completed", JSON.stringify(body));
      assert.equal(terminals(body.events).length, 1);
    } finally {
      a.child.kill("SIGCONT");
      await b.stop();
      await a.stop();
    }
  },
);

pgTest(
  "a stream=false client of a replica whose lease lapsed mid-run gets runner.replica_lost, not an active run without events",
  async () => {
    const url = await cluster().newDatabase();
    const a = await startReplica(url, "a", ["--lease-seconds", "3"]);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const dir = await tempDir();
      const gate = await gateIn(dir);
      const answer = postJson(`${a.url}/v1/runs?stream=false`, {
        run_id: "quiet-lost",
        conversation_id: "conv-quiet-lost",
        input: { text: "long" },
        config: fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]),
      });
      await eventually(async () => {
        const [row] = await sql`SELECT count(*)::int AS n FROM events
        WHERE run_id = 'quiet-lost' AND type = 'message.delta'`;
        return row.n > 0 ? true : undefined;
      }, "the run's first delta in the store");
      // As a replica stalled past its lease finds it: lapsed, nobody swept yet.
      await sql`UPDATE replicas SET expires_at = clock_timestamp() - interval '1 second'
      WHERE replica_id = 'a'`;
      await a.waitForLog((entry) =>
        entry.msg === "replica lease lost; its runs are fenced"
      );
      await openGate(gate);
      const body = await (await answer).json();
      assert.equal(body.status, "failed", JSON.stringify(body));
      assert.equal(body.code, "runner.replica_lost");
      assert.deepEqual(terminals(body.events).map((event) => event.data.code), [
        "runner.replica_lost",
      ]);
      assert.equal(body.events.at(-1).type, "run.failed");
    } finally {
      await sql.end();
      await a.stop();
    }
  },
);

pgTest(
  "a second live process with the same replica id refuses to start; a restart under the id ends its previous instance's runs",
  async () => {
    const url = await cluster().newDatabase();
    const first = await startReplica(url, "same");
    let restarted: Replica | undefined;
    try {
      await assert.rejects(
        startReplica(url, "same"),
        /runner\.replica_id_taken/,
      );
      const run = await gatedRun(first, "conv-restart");
      first.child.kill("SIGKILL");
      await first.child.status;
      await run.stream.return(undefined).catch(() => {});
      for (const pid of agentPids(run.pidFile)) {
        if (isAlive(pid)) Deno.kill(pid, "SIGKILL");
      }
      restarted = await startReplica(url, "same");
      const ended = await endedRun(restarted, run.runId);
      assert.equal(ended.status, "failed");
      assert.equal(ended.code, "runner.replica_lost");
      assert.equal(terminals(ended.events).length, 1);
    } finally {
      await restarted?.stop();
      await first.stop();
    }
  },
);

pgTest(
  "replicas started without --replica-id on one host get distinct ids",
  async () => {
    const url = await cluster().newDatabase();
    const one = await startReplica(url, "");
    const two = await startReplica(url, "");
    try {
      assert.notEqual(one.replicaId, two.replicaId);
    } finally {
      await two.stop();
      await one.stop();
    }
  },
);

pgTest(
  "a browser POST (with Origin) through a non-owner reaches the owner; a client's cluster-token header earns nothing",
  async () => {
    await withTwoReplicas(await cluster().newDatabase(), async (a, b) => {
      const dir = await tempDir();
      const config = fixtureConfig(join(dir, "ws"));
      const first = await postMessage(a.url, {
        conversation: "conv-browser",
        text: "one",
        config,
      });
      assert.equal((await first.json()).status, "completed");
      // The console served by B posts with B's own origin.
      const viaB = await postMessage(b.url, {
        conversation: "conv-browser",
        text: "two",
        config,
      }, { origin: new URL(b.url).origin, cookie: "session=x" });
      assert.equal(viaB.status, 200, await viaB.clone().text());
      assert.equal(viaB.headers.get("x-runner-replica"), "a");
      assert.equal((await viaB.json()).status, "completed");

      // A foreign page stays refused, with or without a made-up cluster token.
      const guesses: Record<string, string>[] = [
        {},
        { "x-runner-cluster-token": "guess".repeat(8) },
      ];
      for (const extra of guesses) {
        const foreign = await postMessage(b.url, {
          conversation: "conv-browser",
          text: "three",
          config,
        }, { origin: "https://evil.example", ...extra });
        assert.equal(foreign.status, 403);
        assert.equal(
          (await foreign.json()).error.code,
          "http.origin_not_allowed",
        );
      }
    });
  },
);

pgTest(
  "a database outage of several leases while the owner's events are queued: one runner.replica_lost per run in every store view and stream, and the conversation goes on",
  async () => {
    const url = await cluster().newDatabase();
    const a = await startReplica(url, "a");
    const b = await startReplica(url, "b");
    try {
      const run = await gatedRun(a, "conv-outage");
      await cluster().stop();
      // The agent ends its turn while nothing can be stored: A queues the
      // message.completed and run.completed it cannot write.
      await openGate(run.gate);
      // Past a whole lease without the database, each replica knows its lease
      // is gone; only then does the database come back.
      for (const replica of [a, b]) {
        await replica.waitForLog((entry) =>
          entry.msg === "replica lease lost; its runs are fenced"
        );
      }
      await cluster().start();
      for await (const message of run.stream) {
        run.seen.push(JSON.parse(message.data));
      }
      assert.deepEqual(
        terminals(run.seen).map((event) => event.data.code),
        ["runner.replica_lost"],
        JSON.stringify(run.seen),
      );
      assert.equal(run.seen.at(-1)!.type, "run.failed");
      for (const replica of [a, b]) {
        const stored = await endedRun(replica, run.runId);
        assert.equal(stored.status, "failed", replica.replicaId);
        assert.equal(stored.code, "runner.replica_lost");
        assert.equal(
          terminals(stored.events).length,
          1,
          JSON.stringify(stored.events),
        );
        assert.equal(stored.events.at(-1).type, "run.failed");
        assert.ok(
          !stored.events.some((event: RunEvent) =>
            event.type === "run.completed"
          ),
        );
      }
      await eventually(
        () =>
          Promise.resolve(
            agentPids(run.pidFile).some(isAlive) ? undefined : true,
          ),
        "the run's agent to be stopped",
      );
      for (const replica of [b, a]) {
        const next = await eventually(async () => {
          const response = await postJson(
            `${replica.url}/v1/runs?stream=false`,
            {
              conversation_id: "conv-outage",
              input: { text: "again" },
              config: fixtureConfig(join(run.dir, "ws")),
            },
          );
          if (response.status === 503) {
            // Retryable while the replica rejoins after the outage.
            const error = (await response.json()).error;
            assert.equal(error.retryable, true, JSON.stringify(error));
            return undefined;
          }
          return await response.json();
        }, "the conversation's next run");
        assert.equal(next.status, "completed", JSON.stringify(next));
        assert.equal(terminals(next.events).length, 1);
      }
    } catch (error) {
      throw new Error(`${error}\nA's log:\n${a.logs()}\nB's log:\n${b.logs()}`);
    } finally {
      await cluster().start().catch(() => {}); // already running unless a step failed
      await b.stop();
      await a.stop();
    }
  },
);

pgTest(
  "a conversation that went A → B → A: A's warm agent, which missed B's turns, is not reused; the session is restored with every turn",
  async () => {
    const url = await cluster().newDatabase();
    const a = await startReplica(url, "a");
    const b = await startReplica(url, "b");
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const dir = await tempDir();
      // Sessions persist in a shared state dir, as on shared workspace storage.
      const config = fixtureConfig(join(dir, "ws"), [
        "--load-session",
        "--state-dir",
        join(dir, "state"),
      ]);
      const turn = async (replica: Replica, text: string) => {
        const response = await postMessage(replica.url, {
          conversation: "conv-pingpong",
          text,
          config,
        });
        const body = await response.json();
        assert.equal(body.status, "completed", JSON.stringify(body));
        assert.equal(response.headers.get("x-runner-replica"), null);
        const started = body.events.find((event: RunEvent) =>
          event.type === "run.started"
        );
        return `${started.data.agent}: ${deltaText(body.events)}`;
      };
      // Hands the conversation to `replica`, as a lapsed conversation lease would.
      const moveTo = (replica: Replica) =>
        sql`UPDATE conversation_leases SET replica_id = ${replica.replicaId},
        url = ${replica.url} WHERE conversation_id = 'conv-pingpong'`;
      assert.equal(await turn(a, "one"), "cold: echo: one (turn 1)");
      await moveTo(b);
      assert.equal(await turn(b, "two"), "cold: echo: two (turn 2)");
      assert.equal(await turn(b, "three"), "warm: echo: three (turn 3)");
      await moveTo(a);
      // A's warm agent missed turns 2 and 3: a new one loads the session.
      assert.equal(await turn(a, "four"), "cold: echo: four (turn 4)");
      // That one saw every turn: the next run reuses it.
      assert.equal(await turn(a, "five"), "warm: echo: five (turn 5)");
    } finally {
      await sql.end();
      await b.stop();
      await a.stop();
    }
  },
);
