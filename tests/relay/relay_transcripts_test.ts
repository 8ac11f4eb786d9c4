/**
 * Replays the golden coding-relay-v1 transcripts (recordings of the Python hub
 * and daemon) against our hub and our daemon client, frame by frame.
 */

import { ScriptedHub, TestSocket } from "../relay_sockets.ts";
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  createHub,
  type RelayHub,
  type RelayJobResult,
  serveHub,
} from "../../lib/hub/relay_hub.ts";
import type { RunEvent } from "../../lib/events.ts";
import {
  type DaemonJob,
  type DaemonJobResult,
  runDaemonClient,
} from "../../lib/daemon/client.ts";
import { startMcpProxy } from "../../lib/mcp_proxy.ts";
import {
  CLOSE_CLEANUP_UNCONFIRMED,
  CLOSE_PROTOCOL_ERROR,
  encodeHubFrame,
  type JsonObject,
  markerFileName,
  MAX_FRAME_BYTES,
  parseFrame,
  REFUSAL_REASONS,
} from "../../lib/relay.ts";
import { DAEMON_CAPABILITIES } from "../../lib/daemon/client.ts";
import { encodeEventFrames } from "../../lib/relay/event_fit.ts";
import { tempDir } from "../helpers.ts";
import { apiFetch } from "../serve_test_helpers.ts";

/** The recordings, kept with the tests (see their README for the origin). */
const TRANSCRIPTS = fileURLToPath(
  new URL("../fixtures/relay-transcripts", import.meta.url),
);
const TOKEN = "golden-token-7f3a9c2e5b1d4f6a8c0e2b4d6f8a";

interface TextFrame {
  dir: "daemon->hub" | "hub->daemon";
  t_ms: number;
  conn: string;
  text: string;
}
interface CloseFrame {
  dir: "daemon->hub" | "hub->daemon";
  t_ms: number;
  conn: string;
  code: number;
  reason: string;
}
interface Transcript {
  scenario: string;
  frames: TextFrame[];
  close: { close_frames: CloseFrame[] };
  hub_yields?: { item: JsonObject }[];
  harness_log?: JsonObject[];
  http_exchanges?: {
    request_body: string;
    status: number;
    headers: string[];
    body: string;
  }[];
  pending_markers_during_run?: { name: string; content: string }[];
  pending_markers_after_run?: { name: string; content: string }[];
  pending_markers_after?: { name: string; content: string }[];
  fenced_after?: string[];
  restarted_hub_fenced?: string[];
  errors?: {
    run_job_after_fence: { code: string; message: string; retryable: boolean };
  };
}

export function loadTranscript(name: string): Transcript {
  return JSON.parse(Deno.readTextFileSync(join(TRANSCRIPTS, `${name}.json`)));
}

const SCENARIOS = [...Deno.readDirSync(TRANSCRIPTS)]
  .filter((entry) => entry.name.endsWith(".json"))
  .map((entry) => entry.name.slice(0, -5))
  .sort();

function listMarkers(dir: string): { name: string; content: string }[] {
  try {
    return [...Deno.readDirSync(dir)].map((entry) => ({
      name: entry.name,
      content: Deno.readTextFileSync(join(dir, entry.name)),
    })).sort((a, b) => a.name.localeCompare(b.name));
  } catch {
    return [];
  }
}

interface HubJob {
  recordedId: string;
  actualId?: string;
  controller: AbortController;
  events: RunEvent[];
  eventWaiters: (() => void)[];
  result: Promise<RelayJobResult>;
  sentEvents: number;
}

/** The transcript's text and close frames, in the order they were recorded. */
function transcriptSteps(
  transcript: Transcript,
): ((TextFrame & { kind: "text" }) | (CloseFrame & { kind: "close" }))[] {
  return [
    ...transcript.frames.map((frame) => ({ kind: "text" as const, ...frame })),
    ...transcript.close.close_frames.map((frame) => ({
      kind: "close" as const,
      ...frame,
    })),
  ].sort((a, b) => a.t_ms - b.t_ms);
}

/** Replaces each recorded id in `text` with the id this replay actually saw. */
function substituteIds(text: string, idMap: Map<string, string>): string {
  for (const [recorded, actual] of idMap) {
    text = text.replaceAll(recorded, actual);
  }
  return text;
}

function parseOrEmpty(text: string): JsonObject {
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

function expectedYield(item: JsonObject, runId: string): JsonObject {
  return "run_id" in item ? item : { run_id: runId, ...item };
}

/** Builds an MCP handler answering each recorded request with its recorded response. */
function recordedMcpHandler(transcript: Transcript) {
  const answers = new Map<string, unknown>();
  const requests = new Map<string, string>();
  for (const frame of transcript.frames) {
    const parsed = parseOrEmpty(frame.text) as Record<string, string>;
    if (parsed.type === "mcp.request") {
      requests.set(parsed.request_id, JSON.stringify(parsed.payload));
    }
    if (parsed.type === "mcp.response") {
      answers.set(requests.get(parsed.request_id)!, parsed.payload);
    }
  }
  return (_job: unknown, payload: unknown) =>
    Promise.resolve(answers.get(JSON.stringify(payload)) ?? null);
}

async function replayAgainstHub(name: string): Promise<void> {
  const transcript = loadTranscript(name);
  const stateDir = tempDir();
  const makeHub = () =>
    createHub({
      token: TOKEN,
      stateDir,
      mcpHandler: recordedMcpHandler(transcript),
    });
  let hub: RelayHub = makeHub();
  let server = serveHub({ hub });
  const sockets = new Map<string, TestSocket>();
  const closedConns = new Set<string>();
  const jobs = new Map<string, HubJob>();
  const idMap = new Map<string, string>();
  const socketFor = async (conn: string) => {
    let socket = sockets.get(conn);
    if (!socket) {
      if (name === "disconnect_fence" && conn === "B") {
        // Conn A's transport is dropped mid-job; the hub fails and fences the run.
        const jobA = [...jobs.values()][0];
        await sockets.get("A")!.close();
        closedConns.add("A");
        assert.equal(
          (await jobA.result).outcome,
          "disconnected",
          "job A outcome",
        );
        assert.deepEqual(
          listMarkers(stateDir),
          transcript.pending_markers_after,
          "markers kept",
        );
        assert.deepEqual(
          hub.listDaemons().filter((d) => d.fenced).map((d) => d.daemonId),
          transcript.fenced_after,
          "fenced",
        );
        const expectedError = transcript.errors!.run_job_after_fence;
        const error = await hub.runJob({
          daemonId: "golden-daemon",
          runId: "after-fence",
          payload: {},
          onEvent: () => {},
          connectTimeoutMs: 1000,
        }).then(() => undefined, (e) => e);
        assert.deepEqual(
          {
            code: error?.code,
            message: error?.message,
            retryable: error?.retryable,
          },
          expectedError,
          "run after fence",
        );
      }
      if (name === "disconnect_fence" && conn === "C") {
        // A new hub on the same state directory reloads the marker as a fence.
        await hub.close();
        await server.close();
        hub = makeHub();
        server = serveHub({ hub });
        assert.deepEqual(
          hub.listDaemons().map((d) => d.daemonId),
          transcript.restarted_hub_fenced,
          "restarted hub fences",
        );
      }
      socket = await TestSocket.open(server.url);
      sockets.set(conn, socket);
    }
    return socket;
  };
  try {
    for (const step of transcriptSteps(transcript)) {
      if (step.kind === "close") {
        if (closedConns.has(step.conn)) continue;
        closedConns.add(step.conn);
        const socket = sockets.get(step.conn)!;
        if (step.dir === "daemon->hub") {
          await socket.close(step.code);
          continue;
        }
        const expected = name === "missing_hello" && step.conn === "B"
          ? { code: 1008, reason: REFUSAL_REASONS.helloRequired } // ours refuses non-JSON like any bad hello
          : { code: step.code, reason: step.reason };
        assert.deepEqual(
          await socket.closed,
          expected,
          `${name} close of conn ${step.conn}`,
        );
        continue;
      }
      const socket = await socketFor(step.conn);
      // deno-lint-ignore no-explicit-any
      const parsed = parseOrEmpty(step.text) as any;
      if (step.dir === "daemon->hub") {
        if (parsed.type === "run.event") {
          const job = jobs.get(parsed.job_id)!;
          job.sentEvents += 1;
        }
        socket.send(substituteIds(step.text, idMap));
        continue;
      }
      if (parsed.type === "run.start") {
        const controller = new AbortController();
        const job: HubJob = {
          recordedId: parsed.job_id,
          controller,
          events: [],
          eventWaiters: [],
          sentEvents: 0,
          result: undefined as unknown as Promise<RelayJobResult>,
        };
        job.result = hub.runJob({
          daemonId: "golden-daemon",
          runId: parsed.payload.run_id,
          payload: parsed.payload,
          onEvent: (event) => {
            job.events.push(event);
            job.eventWaiters.splice(0).forEach((wake) => wake());
          },
          signal: controller.signal,
          connectTimeoutMs: 1000,
        });
        jobs.set(parsed.job_id, job);
      }
      if (parsed.type === "run.cancel") {
        const job = jobs.get(parsed.job_id)!;
        while (job.events.length < job.sentEvents) {
          await new Promise<void>((wake) => job.eventWaiters.push(wake));
        }
        job.controller.abort();
      }
      const actualText = await socket.nextText();
      const actual = JSON.parse(actualText);
      if (parsed.type === "run.start") {
        idMap.set(parsed.job_id, actual.job_id);
        assert.match(actual.job_id, /^[A-Za-z0-9_-]{22}$/, "job_id");
        if (transcript.pending_markers_during_run) {
          assert.deepEqual(
            listMarkers(stateDir),
            transcript.pending_markers_during_run,
            "marker during run",
          );
        }
      }
      assert.equal(
        actualText,
        substituteIds(step.text, idMap),
        `${name}: hub frame at ${step.t_ms} ms`,
      );
      assert.equal(encodeHubFrame(actual), actualText, "re-encoding");
      if (parsed.type === "daemon.ready" && name === "handshake_ok") {
        const expected = transcript.harness_log![0].result as JsonObject[];
        assert.deepEqual(
          hub.listDaemons().map((d) => ({
            daemon_id: d.daemonId,
            metadata: d.metadata,
            active_jobs: d.activeJobs,
          })),
          expected,
          "listDaemons",
        );
      }
      if (parsed.type === "daemon.pong" && name === "duplicate_id") {
        assert.deepEqual(
          hub.listDaemons().map((d) => d.connected),
          [true],
          "first connection untouched",
        );
      }
    }
    for (const job of jobs.values()) {
      const result = await job.result;
      const expectedOutcome = name === "run_cancel"
        ? "cancelled"
        : name === "disconnect_fence"
        ? "disconnected"
        : "finished";
      assert.equal(result.outcome, expectedOutcome, "outcome");
    }
    if (transcript.hub_yields) {
      const first = [...jobs.values()][0];
      const runId = first.events[0]?.run_id;
      assert.deepEqual(
        first.events,
        transcript.hub_yields.map((y) => expectedYield(y.item, runId)),
        "hub yields",
      );
    }
    if (transcript.pending_markers_after_run) {
      assert.deepEqual(
        listMarkers(stateDir),
        transcript.pending_markers_after_run,
        "markers after run",
      );
    }
    if (name === "run_cancel") {
      assert.deepEqual(
        listMarkers(stateDir),
        transcript.pending_markers_after,
        "markers after cancel",
      );
      assert.equal(
        hub.listDaemons().filter((d) => d.fenced).length,
        0,
        "not fenced",
      );
    }
    if (name === "disconnect_fence") {
      assert.ok(
        listMarkers(stateDir).some((m) =>
          m.name === markerFileName("golden-daemon")
        ),
        "marker must survive",
      );
    }
  } finally {
    for (const socket of sockets.values()) await socket.close();
    await hub.close();
    await server.close();
    await Deno.remove(stateDir, { recursive: true });
  }
}

for (const name of SCENARIOS) {
  Deno.test(`hub replays transcript ${name}`, () => replayAgainstHub(name));
}

Deno.test("codec rejects the obsolete run.cleanup frame", () => {
  const error = parseFrame('{"type":"run.cleanup","job_id":"x"}');
  assert.ok(error instanceof Error, "run.cleanup accepted");
  assert.deepEqual([
    (error as { code?: string }).code,
    (error as { detail?: unknown }).detail,
  ], [
    "relay.protocol_error",
    { reason: "obsolete" },
  ], "run.cleanup error");
  assert.match(error.message, /upgrade hub and daemon together/);
});

// ---------------------------------------------------------------------------
// Our daemon client against a scripted hub that plays the recorded hub frames.

const DAEMON_SCENARIOS = [
  "bad_token",
  "disconnect_fence",
  "duplicate_id",
  "handshake_ok",
  "long_id",
  "mcp_roundtrip",
  "run_cancel",
  "run_ok",
];

/** Which client (by order of appearance) opened each recorded connection. */
function clientOfConn(transcript: Transcript): Map<string, number> {
  const map = new Map<string, number>();
  let next = 0;
  for (const frame of transcript.frames) {
    if (map.has(frame.conn)) continue;
    map.set(
      frame.conn,
      transcript.scenario === "disconnect_fence" ? 0 : next++,
    );
  }
  return map;
}

async function replayAgainstDaemon(name: string): Promise<void> {
  const transcript = loadTranscript(name);
  const hub = new ScriptedHub("daemon->hub");
  const clientOf = clientOfConn(transcript);
  const clients: { controller: AbortController; done: Promise<unknown> }[] = [];
  const conns = new Map<string, TestSocket>();
  const closedConns = new Set<string>();
  const idMap = new Map<string, string>();
  const problems: string[] = [];
  const trace: string[] = [];
  const recordedEvents = (jobId: string) =>
    transcript.frames.map((f) => JSON.parse(f.text)).filter((f) =>
      f.type === "run.event" && f.job_id === jobId &&
      f.event.data?.code !== "agent_runtime.daemon_cancelled"
    ).map((f) => f.event as JsonObject);
  const runJob = async (job: DaemonJob): Promise<DaemonJobResult> => {
    trace.push(`job ${job.jobId} started`);
    if (name === "mcp_roundtrip") {
      await exerciseProxy(job, transcript, problems);
    }
    for (const event of recordedEvents(job.jobId)) job.emit(event);
    if (name === "run_cancel" || name === "disconnect_fence") {
      await new Promise((resolve) =>
        job.signal.addEventListener("abort", resolve, { once: true })
      );
      trace.push(`job ${job.jobId} cancelled`);
    }
    return { cleanupConfirmed: true };
  };
  const startClient = (helloText: string) => {
    const hello = JSON.parse(helloText);
    const controller = new AbortController();
    const done = runDaemonClient({
      url: hub.url,
      daemonId: hello.daemon_id,
      token: hello.token,
      metadata: { harness: "relaygold", label: "ünïcode-ok" },
      runJob,
      reconnectDelayMs: 20,
      signal: controller.signal,
    });
    clients.push({ controller, done });
  };
  try {
    for (const step of transcriptSteps(transcript)) {
      if (step.kind === "close") {
        if (closedConns.has(step.conn)) continue;
        closedConns.add(step.conn);
        const side = conns.get(step.conn)!;
        if (step.dir === "hub->daemon") {
          side.ws.close(step.code, step.reason);
          assert.deepEqual(await side.closed, {
            code: step.code,
            reason: step.reason,
          }, "daemon echoes the close");
        } else {
          clients[clientOf.get(step.conn)!].controller.abort();
          assert.equal((await side.closed).code, step.code, "daemon closes");
        }
        continue;
      }
      const frame = JSON.parse(step.text);
      if (frame.type === "daemon.ping" || frame.type === "daemon.pong") {
        continue; // harness-sent
      }
      let side = conns.get(step.conn);
      if (!side) {
        if (name === "disconnect_fence" && step.conn === "B") {
          conns.get("A")!.ws.close(1011, "transport dropped");
          closedConns.add("A");
        }
        if (clients.length <= clientOf.get(step.conn)!) startClient(step.text);
        side = await hub.accept();
        conns.set(step.conn, side);
      }
      if (step.dir === "hub->daemon") {
        side.ws.send(substituteIds(step.text, idMap));
        continue;
      }
      const actualText = await side.nextText();
      const actual = JSON.parse(actualText);
      let expectedText = step.text;
      if (frame.type === "daemon.hello") {
        expectedText = expectedText.replace(
          `"pid":${frame.metadata.pid}`,
          `"pid":${actual.metadata.pid}`,
        )
          .replace(
            JSON.stringify(frame.metadata.cwd),
            JSON.stringify(actual.metadata.cwd),
          )
          // Our one addition to the hello: the optional capabilities we
          // announce (Python hubs ignore unknown metadata), right after
          // `platform`.
          .replace(
            `"platform":${JSON.stringify(frame.metadata.platform)}`,
            `"platform":${
              JSON.stringify(frame.metadata.platform)
            },"capabilities":${JSON.stringify(DAEMON_CAPABILITIES)}`,
          );
        if (name === "disconnect_fence" && step.conn === "B") {
          assert.equal(
            trace.at(-1),
            `job ${JSON.parse(transcript.frames[2].text).job_id} cancelled`,
            "job awaited before reconnect",
          );
        }
      }
      if (frame.type === "mcp.request") {
        assert.match(actual.request_id, /^[A-Za-z0-9_-]{16}$/, "request_id");
        idMap.set(frame.request_id, actual.request_id);
        expectedText = expectedText.replace(
          frame.request_id,
          actual.request_id,
        );
      }
      assert.equal(
        actualText,
        expectedText,
        `${name}: daemon frame at ${step.t_ms} ms`,
      );
    }
    for (const client of clients) client.controller.abort();
    await Promise.all(clients.map((client) => client.done));
    assert.deepEqual(problems, [], "MCP proxy exchanges");
  } finally {
    for (const client of clients) client.controller.abort();
    await Promise.allSettled(clients.map((client) => client.done));
    await hub.close();
  }
}

async function exerciseProxy(
  job: DaemonJob,
  transcript: Transcript,
  problems: string[],
): Promise<void> {
  const proxy = startMcpProxy({ forward: job.mcp });
  try {
    assert.deepEqual(proxy.serverEntry, {
      type: "http",
      name: "langbot_agent",
      url: proxy.url,
      headers: [],
    }, "server entry");
    const health = await apiFetch(proxy.url.replace("/mcp", "/healthz"));
    assert.deepEqual(
      [health.status, await health.text()],
      [200, '{"ok": true}'],
      "healthz",
    );
    for (const exchange of transcript.http_exchanges!) {
      const response = await apiFetch(proxy.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: exchange.request_body,
      });
      const headers = exchange.headers.map((line) => {
        const name = line.split(": ")[0];
        return `${name}: ${response.headers.get(name)}`;
      });
      const got = {
        status: response.status,
        headers,
        body: await response.text(),
      };
      const want = {
        status: exchange.status,
        headers: exchange.headers,
        body: exchange.body,
      };
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        problems.push(
          `expected ${JSON.stringify(want)}\n got ${JSON.stringify(got)}`,
        );
      }
    }
  } finally {
    await proxy.close();
  }
}

for (const name of DAEMON_SCENARIOS) {
  Deno.test(`daemon client replays transcript ${name}`, () =>
    replayAgainstDaemon(name));
}

// ---------------------------------------------------------------------------
// Daemon client behaviour the transcripts do not show.

async function withScriptedHub(
  runJob: (job: DaemonJob) => Promise<DaemonJobResult>,
  test: (side: TestSocket, client: Promise<void>) => Promise<void>,
): Promise<void> {
  const hub = new ScriptedHub("daemon->hub");
  const controller = new AbortController();
  const client = runDaemonClient({
    url: hub.url,
    daemonId: "laptop",
    token: TOKEN,
    runJob,
    reconnectDelayMs: 20,
    signal: controller.signal,
  });
  client.catch(() => {}); // inspected by the test when it matters
  try {
    const side = await hub.accept();
    assert.equal(
      JSON.parse(await side.nextText()).type,
      "daemon.hello",
      "hello",
    );
    side.ws.send(
      '{"type": "daemon.ready", "daemon_id": "laptop", "protocol": "coding-relay-v1"}',
    );
    await test(side, client);
  } finally {
    controller.abort();
    await client.catch(() => {});
    await hub.close();
  }
}

const start = (jobId: string) =>
  `{"type": "run.start", "job_id": "${jobId}", "payload": {"run_id": "r"}}`;

Deno.test("daemon: a second run.cancel does not cut the job's cleanup short", async () => {
  await withScriptedHub(async (job) => {
    await new Promise((resolve) =>
      job.signal.addEventListener("abort", resolve, { once: true })
    );
    await job.mcp({ jsonrpc: "2.0", method: "notifications/probe" }); // answered after the 2nd cancel
    job.emit({
      type: "state.updated",
      data: { scope: "conversation", key: "cleanup", value: "done" },
    });
    return { cleanupConfirmed: true };
  }, async (side) => {
    side.ws.send(start("job-1"));
    side.ws.send('{"type": "run.cancel", "job_id": "job-1"}');
    const probe = JSON.parse(await side.nextText());
    assert.equal(probe.type, "mcp.request", "probe");
    side.ws.send('{"type": "run.cancel", "job_id": "job-1"}');
    side.ws.send(
      `{"type": "mcp.response", "request_id": "${probe.request_id}", "job_id": "job-1", "payload": null}`,
    );
    assert.deepEqual(
      [await side.nextText(), await side.nextText(), await side.nextText()],
      [
        '{"type":"run.event","job_id":"job-1","event":{"type":"state.updated","data":{"scope":"conversation","key":"cleanup","value":"done"}}}',
        '{"type":"run.event","job_id":"job-1","event":{"type":"run.failed","data":{"error":"daemon run cancelled","code":"agent_runtime.daemon_cancelled"}}}',
        '{"type":"run.finished","job_id":"job-1"}',
      ],
      "cleanup, then cancelled, then finished",
    );
  });
});

Deno.test("daemon: a job that throws reports daemon_unexpected, then finishes", async () => {
  await withScriptedHub(
    () => Promise.reject(new Error("boom")),
    async (side) => {
      side.ws.send(start("job-2"));
      assert.deepEqual([await side.nextText(), await side.nextText()], [
        '{"type":"run.event","job_id":"job-2","event":{"type":"run.failed","data":{"error":"boom","code":"agent_runtime.daemon_unexpected"}}}',
        '{"type":"run.finished","job_id":"job-2"}',
      ], "failure then finish");
    },
  );
});

Deno.test("daemon: unconfirmed cleanup halts the daemon without acknowledging", async () => {
  await withScriptedHub(
    () => Promise.resolve({ cleanupConfirmed: false }),
    async (side, client) => {
      side.ws.send(start("job-3"));
      assert.deepEqual(await side.closed, {
        code: CLOSE_CLEANUP_UNCONFIRMED,
        reason: REFUSAL_REASONS.cleanupUnconfirmed,
      }, "close");
      const error = await client.then(() => undefined, (e) => e);
      assert.equal(
        error?.code,
        "agent_runtime.daemon_cleanup_failed",
        "refuses to reconnect",
      );
    },
  );
});

Deno.test("daemon: run.cleanup is a protocol error", async () => {
  await withScriptedHub(
    () => Promise.resolve({ cleanupConfirmed: true }),
    async (side) => {
      side.ws.send('{"type": "run.cleanup", "job_id": "job-4"}');
      assert.deepEqual(await side.closed, {
        code: CLOSE_PROTOCOL_ERROR,
        reason: REFUSAL_REASONS.obsolete,
      }, "close");
    },
  );
});

Deno.test("codec splits a message.delta over 1 MiB into frames under the limit", () => {
  const content = 'é✓ab"\\\n'.repeat(300_000) + "😀".repeat(1000);
  const event = {
    type: "message.delta",
    run_id: "r",
    data: {
      chunk: {
        role: "assistant",
        content,
        all_content: "Before " + content,
        msg_sequence: 3,
        is_final: true,
      },
    },
  };
  const frames = encodeEventFrames("job", event);
  assert.ok(frames.length >= 2, "not split");
  const chunks = frames.map((text) => {
    assert.ok(
      new TextEncoder().encode(text).length <= MAX_FRAME_BYTES,
      "frame too large",
    );
    return JSON.parse(text).event.data.chunk;
  });
  assert.equal(
    chunks.map((c) => c.content).join(""),
    content,
    "content preserved",
  );
  let seen = "Before ";
  for (const chunk of chunks) {
    seen += chunk.content;
    if (chunk.all_content !== undefined) {
      assert.equal(chunk.all_content, seen, "all_content is the running text");
    }
  }
  assert.deepEqual(
    chunks.map((c) => c.is_final).slice(-2),
    [false, true],
    "only the last piece is final",
  );
  assert.equal(
    encodeEventFrames("job", {
      type: "message.delta",
      data: { chunk: { content: "hi" } },
    }).length,
    1,
    "small delta untouched",
  );
});
