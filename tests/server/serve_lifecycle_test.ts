/**
 * Lifecycle of a real `runner serve`: SIGTERM during streaming runs ends
 * each stream with one terminal event, exits 0 and leaves no agent; after a
 * SIGKILL, the next start fails the interrupted run, reaps its agent and
 * keeps the conversation's session.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  apiFetch,
  fixtureConfig,
  gateIn,
  postJson,
  processAlive,
  startServe,
  streamUntil,
  tempDir,
  terminals,
} from "../serve_test_helpers.ts";
import { pathWithoutBwrap } from "../sandbox_helpers.ts";

const ARGS = ["--allow-custom-commands"];

Deno.test("SIGTERM ends three streaming runs with one terminal event each, exits 0 and leaves no agent", async () => {
  const dir = await tempDir();
  const serve = await startServe({ dataDir: join(dir, "data"), args: ARGS });
  try {
    const runs = await Promise.all([0, 1, 2].map(async (index) => {
      const pidFile = join(dir, `pids-${index}.json`);
      const response = await postJson(`${serve.url}/v1/runs`, {
        conversation_id: `term-${index}`,
        input: { text: "hold" },
        config: fixtureConfig(join(dir, "ws"), [
          "--stall-prompt",
          "--grandchild",
          "--pid-file",
          pidFile,
        ]),
      });
      const { events, messages } = await streamUntil(response, "message.delta");
      const pids = Object.values(
        JSON.parse(await Deno.readTextFile(pidFile)),
      ) as number[];
      return { events, messages, pids };
    }));
    assert.ok(runs.flatMap((run) => run.pids).every(processAlive));

    const [status] = await Promise.all([
      serve.stop("SIGTERM"),
      ...runs.map(async ({ events, messages }) => {
        for await (const message of messages) {
          events.push(JSON.parse(message.data));
        }
      }),
    ]);
    assert.equal(status.code, 0);
    for (const { events, pids } of runs) {
      const ends = terminals(events);
      assert.equal(ends.length, 1);
      assert.equal(ends[0].data.code, "runner.shutting_down");
      assert.equal(events.at(-1), ends[0]);
      for (const pid of pids) {
        assert.ok(!processAlive(pid), `agent process ${pid} survived`);
      }
    }
    assert.match(serve.logs(), /"msg":"stopped"/);
  } finally {
    await serve.stop("SIGKILL");
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("after kill -9 the restarted server fails the run as runner.restarted and keeps the session (without bubblewrap, the agent's group is reaped)", async () => {
  const dir = await tempDir();
  const dataDir = join(dir, "data");
  const gate = await gateIn(dir);
  const pidFile = join(dir, "pids.json");
  // With bwrap the agent's PID namespace dies with the server: nothing is left
  // to reap (tests/security/outlive_test.ts).
  const env = { PATH: pathWithoutBwrap() };
  const first = await startServe({ dataDir, args: ARGS, env });
  let runId: string;
  let sessionId: unknown;
  let pids: number[];
  try {
    const response = await postJson(`${first.url}/v1/runs`, {
      conversation_id: "conv-crash",
      input: { text: "hold" },
      config: fixtureConfig(join(dir, "ws"), [
        "--gate-fifo",
        gate,
        "--grandchild",
        "--pid-file",
        pidFile,
      ]),
    });
    runId = response.headers.get("x-run-id")!;
    const { events, messages } = await streamUntil(response, "message.delta");
    sessionId = events.find((event) =>
      event.type === "state.updated"
    )!.data.value;
    pids = Object.values(
      JSON.parse(await Deno.readTextFile(pidFile)),
    ) as number[];
    await first.stop("SIGKILL");
    await messages.return(undefined).catch(() => {});
  } finally {
    await first.stop("SIGKILL");
  }
  assert.ok(
    pids.some(processAlive),
    "expected the agent's TERM-ignoring grandchild to outlive the server",
  );

  const second = await startServe({ dataDir, args: ARGS, env });
  try {
    for (const pid of pids) {
      assert.ok(
        !processAlive(pid),
        `leftover agent process ${pid} was not reaped`,
      );
    }
    const run = await (await apiFetch(`${second.url}/v1/runs/${runId}`)).json();
    assert.equal(run.status, "failed");
    assert.equal(run.code, "runner.restarted");
    assert.equal(terminals(run.events).length, 1);
    assert.equal(run.events.at(-1).data.code, "runner.restarted");

    const conversation =
      await (await apiFetch(`${second.url}/v1/conversations/conv-crash`))
        .json();
    assert.deepEqual(
      conversation.sessions.map((session: { session_id: string }) =>
        session.session_id
      ),
      [sessionId],
    );
    assert.match(second.logs(), /failed runs interrupted by a restart/);
  } finally {
    await second.stop("SIGTERM");
    await Deno.remove(dir, { recursive: true });
  }
});
