/**
 * `/acp` in a fleet: the ACP SDK's own client (Streamable HTTP and
 * WebSocket) through a real nginx (round robin) in front of two real
 * replicas on one PostgreSQL database. Every request lands wherever nginx
 * sends it; a connection's requests still reach the replica holding it, its
 * sessions' prompts run there, a reconnect loads the session on whichever
 * replica it lands, and after kill -9 of that replica the session is loaded
 * and continued on the other.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type AcpProfile,
  type AcpTestClient,
  agentText,
  initialize,
  isReplayed,
  openAcpClient,
  PROFILES,
} from "../acp_client_helpers.ts";
import { agentCommand } from "../helpers.ts";
import { clusterForThisFile } from "../pg_helpers.ts";
import {
  apiFetch,
  fixtureConfig,
  forgetApiToken,
  makeFifo,
  openGate,
  postJson,
  rememberApiToken,
  tempDir,
} from "../serve_test_helpers.ts";
import {
  FLEET_API_TOKEN,
  newSlot,
  type Replica,
  startReplicaAt,
} from "../fleet_helpers.ts";
import { startNginx, type TestNginx } from "../nginx_helpers.ts";

const cluster = clusterForThisFile();

/**
 * Two replicas behind nginx whose operator target is the fixture agent with
 * loadable sessions kept in one directory both reach (as a shared volume
 * would), working in one shared workspace.
 */
async function withAcpFleet(
  body: (lb: TestNginx, replicas: Replica[], dir: string) => Promise<void>,
  agentFlags: string[] = [],
): Promise<void> {
  const url = await cluster().newDatabase();
  const dir = await tempDir();
  const workspace = join(dir, "ws");
  await Deno.mkdir(workspace);
  const target = [
    "--provider",
    "custom",
    "--acp-command",
    agentCommand([
      "--load-session",
      "--chunks",
      "3",
      "--state-dir",
      join(dir, "agent-sessions"),
      ...agentFlags,
    ]),
    "--workspace",
    workspace,
  ];
  const replicas: Replica[] = [];
  let lb: TestNginx | undefined;
  try {
    for (const id of ["a", "b"]) {
      replicas.push(await startReplicaAt(url, await newSlot(id), target));
    }
    lb = await startNginx(replicas.map((replica) => new URL(replica.url).host));
    rememberApiToken(lb.url, FLEET_API_TOKEN);
    await body(lb, replicas, dir);
  } finally {
    if (lb) forgetApiToken(lb.url);
    await lb?.close();
    for (const replica of replicas.reverse()) await replica.stop();
  }
}

/** A prompt's text answer and the id of the run it was. */
async function prompt(
  editor: AcpTestClient,
  sessionId: string,
  text: string,
): Promise<{ runId: string; text: string }> {
  const before = editor.updates.length;
  const answer = await editor.agent.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text }],
  });
  assert.equal(answer.stopReason, "end_turn");
  const streamed = editor.updates.slice(before);
  const chunks =
    streamed.filter((n) => n.update.sessionUpdate === "agent_message_chunk")
      .length;
  assert.ok(
    chunks >= 1 && chunks <= 3,
    "the answer streamed in the agent's three chunks (joined where they waited together)",
  );
  return {
    runId: (answer._meta?.runner as { run_id: string }).run_id,
    text: agentText(streamed, sessionId),
  };
}

/** The replica whose log says it started run `runId`. */
function runnerOf(replicas: Replica[], runId: string): Promise<Replica> {
  return Promise.any(
    replicas.map((replica) =>
      replica.waitForLog((entry) =>
        entry.msg === "run started" && entry.run_id === runId
      ).then(() => replica)
    ),
  );
}

/** Opens a client through the balancer (or to one replica) and initializes it. */
async function connect(
  lb: { url: string },
  profile: AcpProfile,
): Promise<AcpTestClient> {
  const editor = openAcpClient({
    url: lb.url,
    token: FLEET_API_TOKEN,
    profile,
  });
  const init = await initialize(editor);
  assert.equal(init.agentCapabilities?.loadSession, true);
  return editor;
}

/**
 * Loads `sessionId` and waits for its replay to retell `turns`. Over
 * Streamable HTTP the SDK's server answers `session/load` on the connection's
 * stream and the replayed updates come on the session's, so they may follow
 * the answer.
 */
async function loadReplaying(
  editor: AcpTestClient,
  sessionId: string,
  turns: string[],
): Promise<void> {
  await editor.agent.request("session/load", {
    sessionId,
    cwd: "/editor",
    mcpServers: [],
  });
  const expected = turns.join("");
  const deadline = AbortSignal.timeout(60_000);
  while (
    agentText(editor.updates, sessionId, { replayed: true }) !== expected
  ) {
    const replayed = agentText(editor.updates, sessionId, { replayed: true });
    assert.ok(
      expected.startsWith(replayed),
      `replayed ${JSON.stringify(replayed)}, expected ${
        JSON.stringify(expected)
      }`,
    );
    assert.ok(!deadline.aborted, `the replay stopped at ${replayed}`);
    await Promise.race([
      editor.next(),
      new Promise((resolve) => deadline.addEventListener("abort", resolve)),
    ]);
  }
  assert.ok(editor.updates.every(isReplayed), "only replayed updates so far");
}

for (const profile of PROFILES) {
  Deno.test({
    name:
      `acp ${profile} through nginx: a session's prompts reach its replica, a reconnect loads it anywhere, and after kill -9 of its replica it goes on on the other`,
    sanitizeOps: false,
    sanitizeResources: false,
    fn: () =>
      withAcpFleet(async (lb, replicas) => {
        const first = await connect(lb, profile);
        const { sessionId } = await first.agent.request("session/new", {
          cwd: "/editor",
          mcpServers: [],
        });
        const one = await prompt(first, sessionId, "one");
        assert.equal(one.text, "echo: one (turn 1)");
        const two = await prompt(first, sessionId, "two");
        assert.equal(two.text, "echo: two (turn 2)");
        const holder = await runnerOf(replicas, one.runId);
        assert.equal(
          await runnerOf(replicas, two.runId),
          holder,
          "both prompts ran on the replica holding the connection",
        );
        first.close();
        await first.closed;

        // A reconnect lands wherever nginx sends it; the session is loaded there.
        const second = await connect(lb, profile);
        await loadReplaying(second, sessionId, [one.text, two.text]);
        const three = await prompt(second, sessionId, "three");
        assert.equal(three.text, "echo: three (turn 3)");

        // The replica running the session dies between prompts.
        const doomed = await runnerOf(replicas, three.runId);
        doomed.child.kill("SIGKILL");
        await doomed.child.status;
        await second.closed;

        const third = await connect(lb, profile);
        await loadReplaying(third, sessionId, [one.text, two.text, three.text]);
        const four = await prompt(third, sessionId, "four");
        assert.equal(
          four.text,
          "echo: four (turn 4)",
          "the agent's session went on on the surviving replica",
        );
        const survivor = replicas.find((replica) => replica !== doomed)!;
        assert.equal(await runnerOf(replicas, four.runId), survivor);
        third.close();
        await third.closed;

        const listed = await (await apiFetch(
          `${lb.url}/v1/runs?conversation_id=${sessionId}`,
        )).json();
        assert.deepEqual(
          listed.runs.map((run: { run_id: string }) => run.run_id).reverse(),
          [one.runId, two.runId, three.runId, four.runId],
        );
      }),
  });
}

Deno.test({
  name:
    "acp in a fleet: a prompt on one replica while another runs a turn of the session is refused as busy; once it ended the session moves, and /v1 follow-ups go where it went",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const gateDir = await tempDir();
    const gate = join(gateDir, "gate");
    await makeFifo(gate);
    await withAcpFleet(async (_lb, [a, b], dir) => {
      const onA = await connect(a, "websocket");
      const onB = await connect(b, "websocket");
      try {
        const { sessionId } = await onA.agent.request("session/new", {
          cwd: "/editor",
          mcpServers: [],
        });
        const held = onA.agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: "slow" }],
        });
        while (agentText(onA.updates, sessionId) === "") await onA.next();

        await onB.agent.request("session/resume", { sessionId, cwd: "/e" });
        // A turn started on b would stream its first chunk, then wait on the gate.
        const attempt = onB.agent.request("session/prompt", {
          sessionId,
          prompt: [{ type: "text", text: "meanwhile" }],
        }).then(
          () => undefined,
          (error: { data?: { code?: string; retryable?: boolean } }) => error,
        );
        const streamed = (async () => {
          while (agentText(onB.updates, sessionId) === "") await onB.next();
        })();
        const refused = await Promise.race([attempt, streamed]);
        assert.ok(refused, "a second replica ran a turn at the same time");
        assert.equal(refused.data?.code, "http.conversation_busy");
        assert.equal(refused.data?.retryable, true);

        await openGate(gate);
        assert.equal((await held).stopReason, "end_turn");
        const [moved] = await Promise.all([
          onB.agent.request("session/prompt", {
            sessionId,
            prompt: [{ type: "text", text: "now" }],
          }),
          openGate(gate),
        ]);
        assert.equal(moved.stopReason, "end_turn");
        assert.equal(
          agentText(onB.updates, sessionId),
          "echo: now (turn 2)",
        );

        // The conversation is b's now: a /v1 follow-up sent to a goes there.
        const followUp = await postJson(`${a.url}/v1/runs?stream=false`, {
          conversation_id: sessionId,
          input: { text: "via the api" },
          config: fixtureConfig(join(dir, "ws")),
        });
        assert.equal(followUp.status, 200, await followUp.clone().text());
        assert.equal(followUp.headers.get("x-runner-replica"), b.replicaId);
      } finally {
        onA.close();
        onB.close();
      }
    }, ["--gate-fifo", gate]);
  },
});

Deno.test({
  name:
    "acp in a fleet: session/cancel sent over a connection to another replica cancels the turn where it runs, over each profile",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: () =>
    withAcpFleet(async (_lb, [a, b]) => {
      const onA = await connect(a, "websocket");
      try {
        const { sessionId } = await onA.agent.request("session/new", {
          cwd: "/editor",
          mcpServers: [],
        });
        for (const profile of PROFILES) {
          const before = onA.updates.length;
          // The agent streams its reply, then holds the turn until it is cancelled.
          const turn = onA.agent.request("session/prompt", {
            sessionId,
            prompt: [{ type: "text", text: `cancel me from b (${profile})` }],
          });
          while (agentText(onA.updates.slice(before), sessionId) === "") {
            await onA.next();
          }

          const onB = await connect(b, profile);
          try {
            await onB.agent.request("session/resume", { sessionId, cwd: "/e" });
            await onB.agent.notify("session/cancel", { sessionId });
            // A safety bound: a cancel that never arrives fails instead of hanging.
            const answer = await Promise.race([
              turn,
              new Promise<never>((_, reject) =>
                AbortSignal.timeout(60_000).addEventListener(
                  "abort",
                  () => reject(new Error("the turn on a was not cancelled")),
                )
              ),
            ]);
            assert.equal(answer.stopReason, "cancelled");
            const runId = (answer._meta?.runner as { run_id: string }).run_id;
            assert.equal(
              await runnerOf([a, b], runId),
              a,
              "the turn ran on a, where its connection is",
            );
            const run = await (await apiFetch(`${b.url}/v1/runs/${runId}`))
              .json();
            assert.equal(run.status, "cancelled");
          } finally {
            onB.close();
          }
        }
      } finally {
        onA.close();
      }
    }, ["--stall-prompt"]),
});
