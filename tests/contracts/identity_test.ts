/**
 * The identities the runner computes change with each of their components
 * alone, and only with those: the warm-agent key (a changed env-json value,
 * such as a rotated API key, must not reuse the agent started with the old
 * one) and the run id an `Idempotency-Key` names. The lost-replica sweep's
 * instance check is in store_postgres_test.ts ("a replica restarted under
 * the same id…"); the warm key end to end in warm_safety_test.ts.
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import type { AgentCommand } from "../../lib/agent/launch.ts";
import { parseRunConfig, type RunConfig } from "../../lib/config.ts";
import type { RunRequest } from "../../lib/run/request.ts";
import type { SessionSettings } from "../../lib/run/session_memory.ts";
import { targetParts } from "../../lib/run/targets.ts";
import { warmTargetKey } from "../../lib/run/warm/slot.ts";
import { requestedRunId } from "../../lib/server/idempotency.ts";

const LAUNCH: AgentCommand = {
  argv: ["agent", "--acp"],
  commandText: "agent --acp",
  cwd: "/w",
  env: { PATH: "/usr/bin", PROVIDER_API_KEY: "key-1" },
  secrets: ["key-1"],
};

function keyOf(
  config: RunConfig,
  change: {
    request?: Partial<RunRequest>;
    config?: Partial<RunConfig>;
    launch?: Partial<AgentCommand>;
  } = {},
): string {
  const request: RunRequest = {
    conversationId: "chat",
    input: { text: "hi" },
    ...change.request,
    config: { ...config, ...change.config },
  };
  return warmTargetKey(targetParts(request, { ...LAUNCH, ...change.launch }));
}

Deno.test("warm key: every part of a local target alone changes it; the run's other settings do not", () => {
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": "agent --acp",
    workspace: "/w",
  });
  const base = keyOf(config);
  assert.equal(keyOf(config), base, "stable");
  const changes: Record<string, Parameters<typeof keyOf>[1]> = {
    "conversation": { request: { conversationId: "other-chat" } },
    "provider": { config: { provider: "claude" } },
    "argv": { launch: { argv: ["agent", "--acp", "--fast"] } },
    "cwd": { launch: { cwd: "/w2" } },
    "a rotated env value (env-json)": {
      launch: { env: { ...LAUNCH.env, PROVIDER_API_KEY: "key-2" } },
    },
    "an added env name": { launch: { env: { ...LAUNCH.env, EXTRA: "1" } } },
    "a dropped env name": { launch: { env: { PATH: "/usr/bin" } } },
    "session-cwd": { config: { sessionCwd: "/w/sub" } },
    "fs-read": { config: { fsRead: !config.fsRead } },
    "fs-write": { config: { fsWrite: !config.fsWrite } },
    "client-terminals": {
      config: { clientTerminals: !config.clientTerminals },
    },
    "model": { config: { model: "fast" } },
    "mode": { config: { mode: "plan" } },
    "session-config-json": { config: { sessionConfigJson: { effort: "low" } } },
    "auth-method": { config: { authMethod: "sso" } },
    "mcp-servers-json": { config: { mcpServersJson: "[]" } },
    "langbot-assets-enabled": {
      config: { langbotAssetsEnabled: !config.langbotAssetsEnabled },
    },
    "langbot-assets-mode": {
      config: {
        langbotAssetsMode: config.langbotAssetsMode === "gateway"
          ? "ephemeral"
          : "gateway",
      },
    },
    "langbot-assets-gateway-host": {
      config: { langbotAssetsGatewayHost: "127.0.0.9" },
    },
    "langbot-assets-gateway-port": {
      config: { langbotAssetsGatewayPort: 9999 },
    },
    "langbot-assets-gateway-public-url": {
      config: { langbotAssetsGatewayPublicUrl: "http://gw.test/mcp" },
    },
  };
  for (const [part, change] of Object.entries(changes)) {
    assert.notEqual(keyOf(config, change), base, part);
  }
  const same: Record<string, Parameters<typeof keyOf>[1]> = {
    "the prompt": { request: { input: { text: "something else" } } },
    "the run id": { request: { runId: "another-run" } },
    "timeout": { config: { timeout: config.timeout + 1 } },
    "delta-coalesce-ms": { config: { deltaCoalesceMs: 7 } },
    "permission-decision": { config: { permissionDecision: "reject_once" } },
    "terminal-timeout": { config: { terminalTimeout: 5 } },
    "terminal-output-bytes": { config: { terminalOutputBytes: 10 } },
    "the command's display text": { launch: { commandText: "shown" } },
    "ssh settings of a local run": { config: { sshTarget: "elsewhere" } },
  };
  for (const [part, change] of Object.entries(same)) {
    assert.equal(keyOf(config, change), base, part);
  }
});

Deno.test("warm key: a remembered session config value counts as the same value asked for; another remembered value changes it", () => {
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": "agent --acp",
    workspace: "/w",
  });
  const request = (change: Partial<RunConfig>): RunRequest => ({
    conversationId: "chat",
    input: { text: "hi" },
    config: { ...config, ...change },
  });
  const key = (change: Partial<RunConfig>, memory?: SessionSettings) =>
    warmTargetKey(targetParts(request(change), LAUNCH, memory));
  const asked = key({ model: "fast", mode: "plan" });
  assert.equal(key({}, { model: "fast", mode: "plan" }), asked);
  assert.equal(key({ model: "fast" }, { mode: "plan" }), asked);
  assert.notEqual(key({}, { model: "smart", mode: "plan" }), asked);
  // What the run asks wins over what is remembered.
  assert.equal(key({ model: "fast", mode: "plan" }, { model: "smart" }), asked);
  // Without reuse-session nothing remembered is wanted.
  assert.equal(
    key({ reuseSession: false }, { model: "fast" }),
    key({ reuseSession: false }),
  );
  assert.equal(
    key({ sessionConfigJson: { effort: "low" } }),
    key({}, { config: { effort: "low" } }),
  );
});

Deno.test("warm key: every ssh setting of a remote-ssh target alone changes it", () => {
  const config = parseRunConfig({
    provider: "custom",
    "acp-command": "agent --acp",
    workspace: "/w",
    location: "remote-ssh",
    "ssh-target": "me@box",
  });
  const base = keyOf(config);
  assert.notEqual(keyOf({ ...config, location: "local" }), base, "location");
  for (
    const [part, change] of Object.entries<Partial<RunConfig>>({
      "ssh-target": { sshTarget: "me@box2" },
      "ssh-target user": { sshTarget: "you@box" },
      "ssh-port": { sshPort: config.sshPort + 1 },
      "ssh-identity-file": { sshIdentityFile: "/keys/other" },
      "ssh-extra-options": { sshExtraOptions: ["-oBatchMode=yes"] },
      "remote-shell": {
        remoteShell: config.remoteShell === "bash" ? "powershell" : "bash",
      },
    })
  ) {
    assert.notEqual(keyOf(config, { config: change }), base, part);
  }
});

/** The run id a POST with these headers and body `run_id` names. */
async function runIdOf(
  headers: Record<string, string>,
  runId?: string,
): Promise<string | undefined> {
  const app = new Hono().post(
    "/",
    (c) => c.json({ id: requestedRunId(c, runId) ?? null }),
  );
  const answer = await app.request("/", { method: "POST", headers });
  return (await answer.json()).id ?? undefined;
}

Deno.test("idempotency: each key names its own run; the same key, padded, the same run; run_id wins", async () => {
  const key = "retry-7Hq2";
  const id = await runIdOf({ "idempotency-key": key });
  assert.match(id!, /^idem-[0-9a-f]{32}$/);
  assert.equal(await runIdOf({ "idempotency-key": key }), id, "stable");
  assert.equal(await runIdOf({ "idempotency-key": ` ${key} ` }), id, "padded");
  for (
    const other of ["retry-7Hq3", "Retry-7Hq2", "retry-7Hq2x", "retry-7Hq"]
  ) {
    assert.notEqual(await runIdOf({ "idempotency-key": other }), id, other);
  }
  assert.equal(await runIdOf({}), undefined, "no key: a new id");
  assert.equal(
    await runIdOf({ "idempotency-key": key }, "chosen-run"),
    "chosen-run",
  );
});
