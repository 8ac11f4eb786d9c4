/**
 * A conversation remembers the session config values its runs asked for,
 * through real `runner serve` processes (SQLite, PostgreSQL, a real `runner
 * daemon` behind the hub) and the fixture agent: a later run of the
 * conversation that asks none gets them set again on its restored session
 * (the fixture reports them in force), a value a run asks for wins and is
 * remembered instead, a warm agent is reused only for the same values, a
 * reset session keeps them, and forgetting the conversation forgets them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import {
  daemonProcess,
  daemonTokenFile,
  serveWithHub,
} from "../daemon_test_helpers.ts";
import { newSlot, startReplicaAt } from "../fleet_helpers.ts";
import { fixtureCommand, tempDir } from "../helpers.ts";
import { clusterForThisFile } from "../pg_helpers.ts";
import { SSHD_PATH, sshTargetConfig, startSshd } from "../ssh_helpers.ts";
import {
  apiFetch,
  deltaText,
  postJson,
  type ServeProcess,
  sseEvents,
  startServe,
  terminals,
} from "../serve_test_helpers.ts";

const cluster = clusterForThisFile();

function configured(events: RunEvent[]) {
  return events.filter((e) =>
    e.type === "session.configured" && e.data.by === undefined
  ).map((e) => e.data);
}

function remembered(events: RunEvent[]) {
  return events.filter((e) =>
    e.type === "state.updated" && e.data.key === "external.acp_session_config"
  ).map((e) => e.data.value);
}

/** Where the scenario's runs go, and how the runner is restarted between them. */
interface Target {
  url(): string;
  /** Extra run config (location, daemon id). */
  config: Record<string, unknown>;
  /** Restarts the runner (a new process, the same store), when the target can. */
  restart?: () => Promise<void>;
}

/** One run of conversation `conversation`, with `extra` config; its events. */
async function runOf(
  target: Target,
  base: Record<string, unknown>,
  extra: Record<string, unknown> = {},
): Promise<RunEvent[]> {
  const response = await postJson(`${target.url()}/v1/runs`, {
    conversation_id: "c-memory",
    input: { text: "hi" },
    config: { ...base, ...target.config, ...extra },
  });
  assert.equal(response.status, 200);
  const events = await sseEvents(response);
  assert.equal(terminals(events).length, 1);
  assert.equal(events.at(-1)!.type, "run.completed", JSON.stringify(events));
  return events;
}

async function settingsOf(target: Target): Promise<unknown[]> {
  const response = await apiFetch(`${target.url()}/v1/conversations/c-memory`);
  const body = await response.json();
  return body.sessions.map((s: { settings: unknown }) => s.settings);
}

/**
 * Run 1 asks model and mode; run 2 (a new agent process, the session
 * restored by session/load) asks none and gets them; run 3 asks another
 * mode, which wins and is remembered; forgetting the conversation forgets
 * them.
 */
async function rememberedAcrossRestores(target: Target): Promise<void> {
  const base = {
    provider: "custom",
    workspace: join(tempDir(), "ws"),
    "acp-command": fixtureCommand(
      "--session-config",
      "both",
      "--load-session",
      "--state-dir",
      tempDir(),
    ),
  };
  const first = await runOf(target, base, { model: "fast", mode: "plan" });
  assert.deepEqual(remembered(first), [{ model: "fast", mode: "plan" }]);
  assert.deepEqual(await settingsOf(target), [{ model: "fast", mode: "plan" }]);
  await target.restart?.();
  const second = await runOf(target, base);
  assert.equal(second[0].data.agent, "cold");
  assert.deepEqual(configured(second), [{
    model: "fast",
    mode: "plan",
    config: { mode: "plan", model: "fast", effort: "medium", verbose: false },
    changed: ["model", "mode"],
    remembered: ["model", "mode"],
  }]);
  assert.match(deltaText(second), /^config: mode=plan model=fast /);
  assert.ok(!second.some((e) => e.type === "session.reset"));
  assert.deepEqual(remembered(second), []);
  const third = await runOf(target, base, { mode: "acceptEdits" });
  assert.deepEqual(configured(third)[0].remembered, ["model"]);
  assert.match(deltaText(third), /^config: mode=acceptEdits model=fast /);
  assert.deepEqual(await settingsOf(target), [{
    model: "fast",
    mode: "acceptEdits",
  }]);
  await target.restart?.();
  const fourth = await runOf(target, base);
  assert.match(deltaText(fourth), /^config: mode=acceptEdits model=fast /);
  // Right after its run's end, even a daemon's (which lets go of its run
  // only once the daemon acknowledged the end).
  const deleted = await apiFetch(
    `${target.url()}/v1/conversations/c-memory`,
    { method: "DELETE" },
  );
  const forgotten = await deleted.json();
  assert.equal(deleted.status, 200, JSON.stringify(forgotten));
  assert.equal(forgotten.deleted_sessions, 1);
  const fresh = await runOf(target, base);
  assert.equal(configured(fresh)[0].remembered, undefined);
  assert.match(deltaText(fresh), /^config: mode=default model=smart /);
  assert.deepEqual(await settingsOf(target), [null]);
}

/**
 * {@linkcode rememberedAcrossRestores} on the server `start` starts, which
 * is stopped and started again (on the same store) for each restart.
 */
async function rememberedAcrossRestarts(
  start: () => Promise<ServeProcess>,
): Promise<void> {
  let serve = await start();
  try {
    await rememberedAcrossRestores({
      url: () => serve.url,
      config: {},
      async restart() {
        await serve.stop();
        serve = await start();
      },
    });
  } finally {
    await serve.stop();
  }
}

Deno.test("[sqlite] runner serve: a restored session of a later run gets the conversation's remembered model and mode, a value asked for wins, forgetting the conversation forgets them", async () => {
  const dataDir = tempDir();
  const args = ["--allow-custom-commands", "--agent-idle-timeout", "0"];
  await rememberedAcrossRestarts(() => startServe({ dataDir, args }));
});

Deno.test({
  name:
    "[postgres] runner serve: a restored session of a later run gets the conversation's remembered model and mode, a value asked for wins, forgetting the conversation forgets them",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const url = await cluster().newDatabase();
    const slot = await newSlot("a");
    const args = ["--agent-idle-timeout", "0"];
    await rememberedAcrossRestarts(() => startReplicaAt(url, slot, args));
  },
});

Deno.test({
  name:
    "[remote-ssh] runner serve: a restored session of a later run gets the conversation's remembered model and mode over a real sshd",
  ignore: !SSHD_PATH,
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const sshd = await startSshd();
    const serve = await startServe({
      dataDir: tempDir(),
      args: ["--allow-custom-commands", "--agent-idle-timeout", "0"],
    });
    try {
      await rememberedAcrossRestores({
        url: () => serve.url,
        config: sshTargetConfig(sshd),
      });
    } finally {
      await serve.stop();
      await sshd.close();
    }
  },
});

Deno.test("runner serve: a warm agent is reused for the remembered values, not for others; a session reset keeps the remembered mode", async () => {
  const serve = await startServe({
    dataDir: tempDir(),
    args: ["--allow-custom-commands"],
  });
  try {
    const target: Target = { url: () => serve.url, config: {} };
    // Sessions live in the agent process only: a new agent cannot restore one.
    const base = {
      provider: "custom",
      workspace: join(tempDir(), "ws"),
      "acp-command": fixtureCommand("--session-config", "both"),
    };
    const first = await runOf(target, base, { model: "fast", mode: "plan" });
    assert.equal(first[0].data.agent, "cold");
    const second = await runOf(target, base);
    assert.equal(second[0].data.agent, "warm");
    assert.deepEqual(configured(second)[0].changed, []);
    assert.deepEqual(configured(second)[0].remembered, ["model", "mode"]);
    assert.match(deltaText(second), /^config: mode=plan model=fast /);
    // Another model is another target: a new agent, whose session is new.
    const third = await runOf(target, base, { model: "smart" });
    assert.equal(third[0].data.agent, "cold");
    assert.ok(third.some((e) => e.type === "session.reset"));
    assert.deepEqual(configured(third)[0].remembered, ["mode"]);
    assert.match(deltaText(third), /^config: mode=plan model=smart /);
    assert.deepEqual(remembered(third), [{ model: "smart", mode: "plan" }]);
  } finally {
    await serve.stop();
  }
});

Deno.test("through a real runner daemon, run.start carries the remembered values: a restored session of a later run gets them, a value asked for wins", async () => {
  const { serve, hubUrl } = await serveWithHub();
  const tokenFile = daemonTokenFile();
  let daemon = daemonProcess(hubUrl, "mem-laptop", tokenFile, {
    args: ["--agent-idle-timeout", "0"],
  });
  try {
    await daemon.connected;
    await rememberedAcrossRestores({
      url: () => serve.url,
      config: { location: "daemon", "daemon-id": "mem-laptop" },
      async restart() {
        assert.equal(await daemon.stop(), 0);
        daemon = daemonProcess(hubUrl, "mem-laptop", tokenFile, {
          args: ["--agent-idle-timeout", "0"],
        });
        await daemon.connected;
      },
    });
  } finally {
    await daemon.stop();
    await serve.stop();
  }
});
