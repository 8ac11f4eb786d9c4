/**
 * Property-based tests of the streaming path's edges, on the real modules:
 * the streaming redactor, the coalescing stage in front of the event
 * numbering, and the hand-over from stored to live events of a reader. For
 * random texts (emoji, combining marks, surrogate pairs, configured secrets
 * placed anywhere and across chunk boundaries), random chunkings and random
 * interleavings with tool calls and terminal events, the text clients get is
 * the agent's minus redactions, in order, once, and every delta is
 * well-formed Unicode.
 *
 * @module
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import type { RunEvent } from "../../lib/events.ts";
import { createDeltaCoalescer } from "../../lib/run/coalesce.ts";
import { createEventEmitter, TextBuilder } from "../../lib/run/events.ts";
import { createStreamRedactor, redactSecrets } from "../../lib/secrets.ts";
import {
  type FollowOptions,
  followRunEvents,
} from "../../lib/server/stream.ts";
import type { RunStore } from "../../lib/store/types.ts";
import { openStoreNow, tempDir } from "../helpers.ts";
import { join } from "node:path";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  sseEvents,
  withServe,
} from "../serve_test_helpers.ts";
import {
  agentScript,
  chunked,
  type ScriptStep,
  secretsAndText,
  type TextCase,
} from "../stream_arbitraries.ts";

function assertWellFormed(piece: string, where: string) {
  assert.ok(
    piece.isWellFormed(),
    `${where} holds a lone surrogate: ${JSON.stringify(piece)}`,
  );
}

Deno.test("redactor: however the text is cut, the pieces join to the redacted whole and each is well-formed", () => {
  fc.assert(
    fc.property(
      chunked(),
      ({ secrets, text, chunks }: TextCase & { chunks: string[] }) => {
        const redactor = createStreamRedactor(secrets);
        const out = chunks.map((piece) => redactor.push(piece));
        out.push(redactor.end());
        out.forEach((piece) => assertWellFormed(piece, "a redacted piece"));
        assert.equal(out.join(""), redactSecrets(text, secrets));
      },
    ),
    { numRuns: 500 },
  );
});

Deno.test("redactor, found by the property: without any secret, half an emoji waits for its other half", () => {
  const redactor = createStreamRedactor([]);
  assert.equal(redactor.push("ok \ud83d"), "ok ");
  assert.equal(redactor.push("\ude00!"), "\ud83d\ude00!");
  assert.equal(redactor.push("\ud83d"), "");
  assert.equal(redactor.end(), "\ud83d", "a text that ends cut keeps its end");
});

type Step = ScriptStep;

/** What a reader sees: every event but the deltas, in order, and each stream's deltas joined. */
interface Seen {
  events: string[];
  message: string;
  thought: string;
}

/** What a client sees of `events`. */
function seen(events: RunEvent[]): Seen {
  const out: Seen = { events: [], message: "", thought: "" };
  for (const event of events) {
    if (event.type === "message.delta") {
      out.message += (event.data.chunk as { content: string }).content;
    } else if (event.type === "thought.delta") {
      out.thought += event.data.content as string;
    } else out.events.push(event.type);
  }
  return out;
}

/**
 * What the client should see for `steps`: each stream's text of a turn (up
 * to a flush or the terminal event) redacted as a whole, whatever other
 * events came between its chunks, and the other events in order.
 */
function expected(steps: Step[], secrets: string[]): Seen {
  const out: Seen = { events: [], message: "", thought: "" };
  const turn = { message: "", thought: "" };
  const endTurn = () => {
    out.message += redactSecrets(turn.message, secrets);
    out.thought += redactSecrets(turn.thought, secrets);
    turn.message = turn.thought = "";
  };
  for (const step of steps) {
    if (step.kind === "text") {
      turn[step.stream] += step.text;
    } else if (step.kind === "flush") endTurn();
    else {
      out.events.push(step.type);
      if (step.type === "run.completed" || step.type === "run.failed") break;
    }
  }
  endTurn();
  return out;
}

Deno.test("coalescer: deltas carry the agent's text minus redactions, in order around every other event, once, well-formed", () => {
  fc.assert(
    fc.property(
      agentScript(),
      fc.constantFrom(0, 1e9),
      ({ secrets, steps }: { secrets: string[]; steps: Step[] }, windowMs) => {
        const events: RunEvent[] = [];
        let msgSequence = 0;
        const coalescer = createDeltaCoalescer({
          next: createEventEmitter({
            runId: "run",
            sink: (event) => events.push(event),
          }),
          windowMs,
          secrets,
          nextMessageSequence: () => ++msgSequence,
        });
        const kept = new TextBuilder();
        for (const step of steps) {
          if (step.kind === "text") {
            coalescer.text(
              step.stream,
              step.text,
              step.stream === "message" ? kept : undefined,
            );
          } else if (step.kind === "flush") coalescer.flush();
          else coalescer.emit(step.type, {});
        }
        coalescer.flush();
        for (const event of events) {
          const content = event.type === "message.delta"
            ? (event.data.chunk as { content: string }).content
            : event.data.content;
          if (typeof content === "string") assertWellFormed(content, "a delta");
        }
        assert.deepEqual(seen(events), expected(steps, secrets));
        const messageDeltas = events.filter((e) => e.type === "message.delta");
        assert.equal(
          kept.toString(),
          messageDeltas.map((e) =>
            (e.data.chunk as { content: string })
              .content
          ).join(""),
        );
        assert.deepEqual(
          messageDeltas.map((e) =>
            (e.data.chunk as { msg_sequence: number }).msg_sequence
          ),
          messageDeltas.map((_, index) => index + 1),
        );
      },
    ),
    { numRuns: 500 },
  );
});

/** A hand-over case: how many events, how many before the reader attaches, and when the rest arrive. */
interface HandOverCase {
  total: number;
  before: number;
  after: number;
  maxPending: number;
  /** Events published just before the reader's n-th read of the store. */
  duringRead: number[];
}

const handOverCase: fc.Arbitrary<HandOverCase> = fc.record({
  total: fc.integer({ min: 1, max: 30 }),
  before: fc.nat({ max: 30 }),
  after: fc.nat({ max: 30 }),
  maxPending: fc.integer({ min: 1, max: 8 }),
  duringRead: fc.array(fc.nat({ max: 6 }), { maxLength: 8 }),
}).map((c) => {
  const before = Math.min(c.before, c.total);
  return { ...c, before, after: Math.min(c.after, before) };
});

/**
 * A run's live side as the recorder makes it: each event stored, then
 * (once durable) handed to the listeners, in order; `done` once the
 * terminal event is out.
 */
function liveRun(store: RunStore, runId: string, total: number) {
  const listeners = new Set<(event: RunEvent) => void>();
  let published = 0;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => finish = resolve);
  async function publish(count: number) {
    for (let i = 0; i < count && published < total; i++) {
      published++;
      const event = store.appendEvent(runId, {
        run_id: runId,
        type: published === total ? "run.completed" : "message.delta",
        data: { n: published },
        sequence: published,
        timestamp: 0,
      });
      await store.durable();
      for (const listener of listeners) listener(event);
      if (published === total) finish();
    }
  }
  const run = {
    runId,
    subscribe(listener: (event: RunEvent) => void) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    done,
  } as unknown as NonNullable<FollowOptions["run"]>;
  return { run, publish, rest: () => publish(total) };
}

Deno.test("hand-over: a reader attaching mid-run gets each event after its sequence once, in order, however stored and live events interleave", async () => {
  const store = openStoreNow(tempDir());
  let cases = 0;
  try {
    await fc.assert(
      fc.asyncProperty(handOverCase, async (c) => {
        const runId = `run-${++cases}`;
        await store.createRun({ runId, config: {}, status: "active" });
        const live = liveRun(store, runId, c.total);
        await live.publish(c.before);
        let reads = 0;
        const reading: RunStore = {
          ...store,
          async getEvents(id, options) {
            await live.publish(c.duringRead[reads++] ?? 0);
            return await store.getEvents(id, options);
          },
        };
        const follower = followRunEvents({
          store: reading,
          runId,
          run: live.run,
          after: c.after,
          maxPendingEvents: c.maxPending,
        });
        const got: number[] = [];
        const rest = live.rest();
        for (let event; (event = await follower.next());) {
          got.push(event.sequence!);
        }
        await rest;
        assert.deepEqual(
          got,
          Array.from({ length: c.total - c.after }, (_, i) => c.after + i + 1),
        );
      }),
      { numRuns: 200 },
    );
  } finally {
    await store.close();
  }
});

Deno.test("arbitraries: the generated texts hold secrets, pairs and combining marks, also cut inside them", () => {
  const samples = fc.sample(secretsAndText(), 300);
  const whole = samples.map((s) => s.text).join("");
  assert.ok(/\p{Extended_Pictographic}/u.test(whole), "an emoji");
  assert.ok(/\u0301/.test(whole), "a combining mark");
  assert.ok(
    samples.some((s) => s.secrets.some((secret) => s.text.includes(secret))),
    "a whole secret",
  );
  const split = fc.sample(chunked(), 300).some((c) =>
    c.chunks.some((chunk) => /[\ud800-\udbff]$/.test(chunk))
  );
  assert.ok(split, "a chunk ending inside a surrogate pair");
});

/** The fixture's `--script` for a generated turn: each text step one ACP chunk, other events as tool calls. */
function fixtureScript(steps: ScriptStep[]): string[][] {
  const script: string[][] = [];
  let tools = 0;
  for (const step of steps) {
    if (step.kind === "text") {
      script.push([step.stream === "message" ? "text" : "thought", step.text]);
    } else if (step.kind === "event") {
      if (step.type === "run.completed" || step.type === "run.failed") break;
      script.push(["tool", `t${++tools}`]);
    }
  }
  return script;
}

/**
 * The generated turn as the runner should pass it on: other events become
 * the fixture's tool calls; it completes when it has message text.
 */
function fixtureSteps(steps: ScriptStep[]): ScriptStep[] {
  const out: ScriptStep[] = [];
  for (const step of steps) {
    if (step.kind === "flush") continue;
    if (step.kind === "text") {
      out.push(step);
      continue;
    }
    if (step.type === "run.completed" || step.type === "run.failed") break;
    out.push({ kind: "event", type: "tool.call.started" });
  }
  // A turn without message text fails (acp.empty_response).
  const answered = out.some((s) => s.kind === "text" && s.stream === "message");
  const end = answered ? "run.completed" : "run.failed";
  return [...out, { kind: "event", type: end }];
}

Deno.test("end to end through runner serve and the fixture agent: SSE and the store carry the agent's text minus redactions, in order, once, well-formed", async () => {
  const args = [
    "--allow-custom-commands",
    "--allow-env-names",
    "API_TOKEN_0,API_TOKEN_1,API_TOKEN_2",
  ];
  await withServe({ args }, async (serve, dir) => {
    await fc.assert(
      fc.asyncProperty(
        agentScript(),
        fc.constantFrom(0, 5, 50),
        async ({ secrets, steps }, coalesceMs) => {
          const env = Object.fromEntries(
            secrets.map((value, i) => [`API_TOKEN_${i}`, value]),
          );
          const response = await postJson(`${serve.url}/v1/runs`, {
            input: { text: "go" },
            config: {
              ...fixtureConfig(join(dir, "ws"), [
                "--script",
                JSON.stringify(fixtureScript(steps)),
              ]),
              "env-json": env,
              "delta-coalesce-ms": coalesceMs,
              "langbot-assets-enabled": false,
            },
          });
          assert.equal(response.status, 200, await response.clone().text());
          const runId = response.headers.get("x-run-id")!;
          // A second reader attaches while the run streams: it reads the
          // store, then joins live delivery, and must see each event once.
          const attached = apiFetch(`${serve.url}/v1/runs/${runId}/events`)
            .then(sseEvents);
          const live = await sseEvents(response);
          const late = await attached;
          const stored =
            (await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
              .json()).events as RunEvent[];
          assert.deepEqual(
            late.map((event) => event.sequence),
            live.map((_, index) => index + 1),
          );
          const want = expected(fixtureSteps(steps), secrets);
          const readers = [["SSE", live], ["a reader attached mid-run", late], [
            "the store",
            stored,
          ]] as const;
          for (
            const [where, events] of readers
          ) {
            for (const event of events) {
              const content = event.type === "message.delta"
                ? (event.data.chunk as { content: string }).content
                : event.data.content;
              if (typeof content === "string") {
                assertWellFormed(content, `a delta in ${where}`);
              }
            }
            const shown = seen(events);
            shown.events = shown.events.filter((type) =>
              type === "tool.call.started" || type.startsWith("run.")
            ).filter((type) => type !== "run.started");
            assert.deepEqual(shown, want, where);
          }
        },
      ),
      { numRuns: 12 },
    );
  });
});
