import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { agentPids, isAlive } from "../helpers.ts";
import { clusterForThisFile, pgTest } from "../pg_helpers.ts";
import {
  apiFetch,
  deltaText,
  fixtureConfig,
  forgetApiToken,
  postJson,
  readSse,
  rememberApiToken,
  type SseMessage,
  tempDir,
  terminals,
} from "../serve_test_helpers.ts";
import {
  eventually,
  FLEET_API_TOKEN,
  gatedFixture,
  newSlot,
  postMessage,
  type Replica,
  type ReplicaSlot,
  startReplicaAt,
} from "../fleet_helpers.ts";
import { startNginx, type TestNginx } from "../nginx_helpers.ts";

const cluster = clusterForThisFile();

/** Replicas `ids` on a fresh database behind nginx; stops everything after `body`. */
async function withBalancedFleet(
  ids: string[],
  body: (
    lb: TestNginx,
    replicas: Replica[],
    restart: (index: number) => Promise<Replica>,
  ) => Promise<void>,
): Promise<void> {
  const url = await cluster().newDatabase();
  const slots: ReplicaSlot[] = [];
  for (const replicaId of ids) slots.push(await newSlot(replicaId));
  const replicas: Replica[] = [];
  let lb: TestNginx | undefined;
  try {
    for (const slot of slots) replicas.push(await startReplicaAt(url, slot));
    lb = await startNginx(slots.map((slot) => `127.0.0.1:${slot.port}`));
    // Clients of the balancer hold the token every replica shares.
    rememberApiToken(lb.url, FLEET_API_TOKEN);
    await body(lb, replicas, async (index) => {
      replicas[index] = await startReplicaAt(url, slots[index]);
      return replicas[index];
    });
  } finally {
    if (lb) forgetApiToken(lb.url);
    await lb?.close();
    for (const replica of replicas.reverse()) await replica.stop();
  }
}

/**
 * Fails unless `response` is a 200. Not `assert.equal(status, 200, await
 * response.clone().text())`: that message is read first, and reading it waits
 * for the whole stream, which for a run still going never comes.
 */
async function assertStreaming(response: Response): Promise<void> {
  if (response.status !== 200) {
    assert.fail(`${response.status}: ${await response.text()}`);
  }
}

/** Reads SSE messages into `events` (ids into `ids`) until the stream ends or breaks. */
async function drain(
  messages: AsyncGenerator<SseMessage>,
  events: RunEvent[],
  ids: string[],
): Promise<void> {
  try {
    for await (const message of messages) {
      if (message.id) ids.push(message.id);
      events.push(JSON.parse(message.data));
    }
  } catch { /* the connection broke: the caller reconnects */ }
}

/**
 * What an SSE client sees of run `runId` through `base`: the stream of
 * `first`, then, while no terminal event came, reconnections to
 * `/events` with `Last-Event-ID` (a retryable 503 is retried).
 */
async function followRun(
  base: string,
  runId: string,
  first: AsyncGenerator<SseMessage>,
  events: RunEvent[],
  ids: string[],
): Promise<void> {
  await drain(first, events, ids);
  await eventually(async () => {
    if (terminals(events).length) return true;
    const response = await apiFetch(`${base}/v1/runs/${runId}/events`, {
      headers: ids.length ? { "last-event-id": ids.at(-1)! } : {},
    }).catch(() => undefined);
    if (!response) return undefined;
    assert.notEqual(
      response.status,
      204,
      `the runner said all was delivered after event ${
        ids.at(-1)
      }, but no terminal event came`,
    );
    if (response.status === 503) {
      const error = (await response.json()).error;
      assert.equal(error.retryable, true, JSON.stringify(error));
      return undefined;
    }
    await assertStreaming(response);
    await drain(readSse(response.body!), events, ids);
    return terminals(events).length ? true : undefined;
  }, `a terminal event of ${runId} through the balancer`);
}

/** A run streaming through the balancer, read up to its first delta. */
interface StartedRun {
  runId: string;
  stream: AsyncGenerator<SseMessage>;
  events: RunEvent[];
  ids: string[];
}

/**
 * Starts a run with `body` at `url` and reads it up to its first delta. As a
 * client would, it starts again after a retryable failure before that delta:
 * on a starved machine a 1 s lease can lapse before the test's kill (the
 * owner then ends the run with `runner.replica_lost`, or a forwarding replica
 * answers `503 runner.replica_unreachable`).
 */
async function startUntilDelta(
  url: string,
  body: Record<string, unknown>,
): Promise<StartedRun> {
  const failures: unknown[] = [];
  while (failures.length < 5) {
    const started = await postJson(url, body);
    if (started.status === 503) {
      const error = (await started.json()).error;
      assert.equal(error.retryable, true, JSON.stringify(error));
      failures.push(error);
      continue;
    }
    await assertStreaming(started);
    const run: StartedRun = {
      runId: started.headers.get("x-run-id")!,
      stream: readSse(started.body!),
      events: [],
      ids: [],
    };
    // next(), not for-await: leaving a for-await would close the stream.
    for (;;) {
      const { value: message, done } = await run.stream.next();
      if (done) break;
      if (message.id) run.ids.push(message.id);
      run.events.push(JSON.parse(message.data));
      if (message.event === "message.delta") return run;
    }
    const end = terminals(run.events).at(-1);
    assert.ok(end?.data.retryable, JSON.stringify(run.events));
    failures.push(end);
  }
  throw new Error(
    `no run reached its first delta: ${JSON.stringify(failures)}`,
  );
}

/** Asserts every replica's stored view of `runId` ends with one terminal, `type`. */
async function assertStoredOnce(
  replicas: Replica[],
  runId: string,
  type: string,
): Promise<Record<string, unknown>> {
  let last: Record<string, unknown> = {};
  for (const replica of replicas) {
    const run = await (await apiFetch(`${replica.url}/v1/runs/${runId}`))
      .json();
    const ends = terminals(run.events);
    assert.equal(ends.length, 1, `${replica.replicaId}: ${run.events}`);
    assert.equal(run.events.at(-1).type, type);
    last = run;
  }
  return last;
}

pgTest(
  "through nginx: /healthz reaches every replica, and each streamed run ends with one terminal event for its client and in every replica's store",
  async () => {
    await withBalancedFleet(["a", "b"], async (lb, replicas) => {
      const seenReplicas = new Set<string>();
      for (let i = 0; i < 2 * replicas.length; i++) {
        const health = await apiFetch(`${lb.url}/healthz`);
        assert.equal(health.status, 200, await health.clone().text());
        const body = await health.json();
        assert.equal(body.status, "ok");
        seenReplicas.add(body.replica_id);
      }
      assert.deepEqual([...seenReplicas].sort(), ["a", "b"]);

      const dir = await tempDir();
      const conversations = ["lb-1", "lb-2", "lb-3"];
      let forwarded = 0;
      for (const [turn, text] of [[1, "one"], [2, "two"]] as const) {
        for (const conversation of conversations) {
          const response = await postJson(`${lb.url}/v1/runs`, {
            conversation_id: conversation,
            input: { text },
            config: fixtureConfig(join(dir, conversation)),
          });
          await assertStreaming(response);
          assert.match(
            response.headers.get("content-type") ?? "",
            /text\/event-stream/,
          );
          if (response.headers.get("x-runner-replica")) forwarded++;
          const runId = response.headers.get("x-run-id")!;
          const events: RunEvent[] = [];
          await drain(readSse(response.body!), events, []);
          const ends = terminals(events);
          assert.equal(ends.length, 1, JSON.stringify(events));
          assert.equal(events.at(-1)!.type, "run.completed");
          assert.equal(
            deltaText(events),
            `echo: ${text} (turn ${turn})`,
            "the conversation's session stayed with its owner",
          );
          await assertStoredOnce(replicas, runId, "run.completed");
        }
      }
      assert.ok(forwarded > 0, "some run went nginx → replica → owner");
    });
  },
);

pgTest(
  "through nginx: kill -9 of a run's owner gives its client one runner.replica_lost, leaves no agent, and the conversation goes on",
  async () => {
    await withBalancedFleet(["a", "b"], async (lb, replicas, restart) => {
      const { dir, pidFile, config } = await gatedFixture();
      const { runId, stream, events, ids } = await startUntilDelta(
        `${lb.url}/v1/runs`,
        { conversation_id: "lb-lost", input: { text: "doomed" }, config },
      );
      const owner = await Promise.any(
        replicas.map((replica) =>
          replica.waitForLog((entry) =>
            entry.msg === "run started" && entry.run_id === runId
          ).then(() => replica)
        ),
      );
      const ownerIndex = replicas.indexOf(owner);
      owner.child.kill("SIGKILL");
      await owner.child.status;

      await followRun(lb.url, runId, stream, events, ids);
      const ends = terminals(events);
      assert.deepEqual(
        ends.map((event) => [event.type, event.data.code]),
        [["run.failed", "runner.replica_lost"]],
      );
      assert.equal(events.at(-1)!.type, "run.failed");
      assert.equal(new Set(ids).size, ids.length, "no event came twice");
      const survivors = replicas.filter((replica) => replica !== owner);
      const stored = await assertStoredOnce(survivors, runId, "run.failed");
      assert.equal(stored.code, "runner.replica_lost");

      // The dead replica comes back on its data dir and port; it reaps the agent.
      const back = await restart(ownerIndex);
      await eventually(
        () =>
          Promise.resolve(
            agentPids(pidFile).some(isAlive) ? undefined : true,
          ),
        "the restarted replica to reap the lost run's agent",
      );
      await assertStoredOnce([back, ...survivors], runId, "run.failed");

      const next = await postMessage(lb.url, {
        conversation: "lb-lost",
        text: "again",
        config: fixtureConfig(join(dir, "ws")),
      });
      assert.equal(next.status, 200, await next.clone().text());
      const body = await next.json();
      assert.equal(body.status, "completed", JSON.stringify(body));
      assert.equal(terminals(body.events).length, 1);
    });
  },
);
