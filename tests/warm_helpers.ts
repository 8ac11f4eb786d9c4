/**
 * Helpers for the warm-agent tests: messages of a conversation through a
 * real `runner serve`, the fixture's record of what each agent process got,
 * and the warm pool as `GET /v1/agents` and `/metrics` show it.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { RunEvent } from "../lib/events.ts";
import { join } from "node:path";
import { readRecord } from "./helpers.ts";
import {
  apiFetch,
  fixtureConfig,
  postJson,
  readSse,
  type ServeProcess,
  terminals,
} from "./serve_test_helpers.ts";

/** One finished message of a conversation. */
export interface Message {
  runId: string;
  events: RunEvent[];
  /** `warm` or `cold`, from `run.started`. */
  agent: string;
  /** Milliseconds from the POST to the first `message.delta`. */
  firstChunkMs: number;
}

/** Posts one message and reads its whole event stream. */
export async function sendMessage(
  serve: ServeProcess,
  body: { conversation_id?: string; text: string; config: unknown },
): Promise<Message> {
  const started = performance.now();
  const response = await postJson(`${serve.url}/v1/runs`, {
    conversation_id: body.conversation_id,
    input: { text: body.text },
    config: body.config,
  });
  assert.equal(response.status, 200, await peekError(response));
  const events: RunEvent[] = [];
  let firstChunkMs = -1;
  for await (const message of readSse(response.body!)) {
    const event = JSON.parse(message.data) as RunEvent;
    if (event.type === "message.delta" && firstChunkMs < 0) {
      firstChunkMs = performance.now() - started;
    }
    events.push(event);
  }
  assert.equal(terminals(events).length, 1);
  const runStarted = events.find((event) => event.type === "run.started");
  return {
    runId: response.headers.get("x-run-id")!,
    events,
    agent: String(runStarted?.data.agent),
    firstChunkMs,
  };
}

/**
 * Sends messages of the conversation `conversationId` with `config`: each
 * call posts one text and reads its whole event stream.
 */
export function conversation(
  serve: ServeProcess,
  config: unknown,
  conversationId = "chat",
): (text: string) => Promise<Message> {
  return (text) =>
    sendMessage(serve, { conversation_id: conversationId, text, config });
}

/**
 * A fixture config in `<dir>/ws` with `flags` whose agent records what it
 * gets in `<dir>/record.jsonl` (read it with {@linkcode recordByProcess}).
 */
export function recordedFixture(
  dir: string,
  flags: string[] = [],
): { record: string; config: Record<string, unknown> } {
  const record = join(dir, "record.jsonl");
  return {
    record,
    config: fixtureConfig(join(dir, "ws"), [...flags, "--record", record]),
  };
}

/** Fixture flags of an agent that loads its sessions, kept in `<dir>/sessions`. */
export function loadableSessions(dir: string): string[] {
  return ["--load-session", "--state-dir", join(dir, "sessions")];
}

async function peekError(response: Response): Promise<string> {
  if (response.status === 200) return "";
  return await response.text();
}

/**
 * The text of a message's `message.completed` events, as the agent wrote it.
 */
export function answers(message: Message): string[] {
  return message.events
    .filter((event) => event.type === "message.completed")
    .map((event) => (event.data.message as { content: string }).content);
}

/** The terminal event of a message. */
export function ending(message: Message): RunEvent {
  return terminals(message.events)[0];
}

/** The ACP methods the fixture received, split by agent process (one list per `start`). */
export function recordByProcess(
  path: string,
): Array<{ pid: number; methods: string[] }> {
  const processes: Array<{ pid: number; methods: string[] }> = [];
  for (const line of readRecord(path)) {
    if (line.event === "start") {
      processes.push({ pid: Number(line.pid), methods: [] });
    } else if (typeof line.method === "string" && line.event === undefined) {
      processes.at(-1)?.methods.push(line.method);
    }
  }
  return processes;
}

/** One warm agent as `GET /v1/agents` lists it. */
export interface ListedAgent {
  agent_id: string;
  conversation_id: string;
  provider: string;
  location: string;
  session_id: string;
  idle_since: string;
  /** In a fleet: the replica that keeps it. */
  replica_id?: string;
}

/** `GET /v1/agents`. */
export async function listAgents(serve: ServeProcess): Promise<ListedAgent[]> {
  const response = await apiFetch(`${serve.url}/v1/agents`);
  assert.equal(response.status, 200);
  return (await response.json()).agents;
}

/** One metric value from `/metrics` (0 when absent). */
export async function metric(
  serve: ServeProcess,
  name: string,
): Promise<number> {
  const text = await (await apiFetch(`${serve.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}
