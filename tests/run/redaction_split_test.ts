/**
 * A secret that the agent prints split across two or three chunks is
 * redacted in everything users see: `runner run`'s stdout and `--json`, the
 * store, and `runner serve`'s SSE, NDJSON and n8n streams. Coalescing is off
 * (`delta-coalesce-ms=0`), so each chunk travels alone: the hard case.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { openStore } from "../../lib/store/open.ts";
import { agentCommand, parseJsonLines, runCli, tempDir } from "../helpers.ts";
import {
  apiFetch,
  deltaText,
  jsonLines,
  postJson,
  sseEvents,
  withServe,
} from "../serve_test_helpers.ts";

const SECRET = "sk-split-SECRET-0123456789";
const ENV_JSON = JSON.stringify({ API_TOKEN: SECRET });
const SPLITS: Record<string, string[]> = {
  "two chunks": ["say sk-split-SE", "CRET-0123456789 now"],
  "three chunks": ["say sk-spl", "it-SECRET-01", "23456789 now"],
};
const SHOWN = "say [REDACTED] now";

function agent(parts: string[]): string {
  return agentCommand(["--text-parts", JSON.stringify(parts)]);
}

function assertNoSecret(text: string, where: string) {
  assert.ok(!text.includes(SECRET), `the secret in ${where}`);
  for (const part of Object.values(SPLITS).flat()) {
    const piece = part.replace(/^say |\snow$/g, "");
    assert.ok(!text.includes(piece), `"${piece}" in ${where}`);
  }
}

function cliArgs(dataDir: string, parts: string[], ...extra: string[]) {
  return [
    "run",
    "custom",
    "--acp-command",
    agent(parts),
    "--workspace",
    join(tempDir(), "ws"),
    "--data-dir",
    dataDir,
    "--env-json",
    ENV_JSON,
    "--delta-coalesce-ms",
    "0",
    ...extra,
    "hi",
  ];
}

for (const [name, parts] of Object.entries(SPLITS)) {
  Deno.test(`runner run: a secret split over ${name} is redacted on stdout, in --json and in the store`, async () => {
    const dataDir = tempDir();
    const human = await runCli(cliArgs(dataDir, parts));
    assert.equal(human.code, 0, human.stderr);
    assert.equal(human.stdout, SHOWN + "\n");
    const json = await runCli(cliArgs(dataDir, parts, "--json"));
    assert.equal(json.code, 0, json.stderr);
    assertNoSecret(json.stdout, "--json");
    const events = parseJsonLines(json.stdout) as unknown as RunEvent[];
    assert.equal(deltaText(events), SHOWN);
    const store = await openStore({ dataDir });
    try {
      for (const run of await store.listRuns({ limit: 10 })) {
        const stored = await store.getEvents(run.runId);
        assertNoSecret(JSON.stringify(stored), "the store");
        assert.equal(deltaText(stored), SHOWN);
      }
    } finally {
      await store.close();
    }
  });
}

Deno.test("runner serve: a secret split over two or three chunks is redacted on SSE, NDJSON, n8n and in the store", async () => {
  const workspace = tempDir();
  await withServe({
    args: [
      "--allow-custom-commands",
      "--provider",
      "custom",
      "--workspace",
      workspace,
      "--env-json",
      ENV_JSON,
      "--delta-coalesce-ms",
      "0",
      "--n8n-merge-ms",
      "0",
    ],
  }, async (serve) => {
    for (const [name, parts] of Object.entries(SPLITS)) {
      const body = {
        input: { text: "hi" },
        config: { "acp-command": agent(parts) },
      };
      const sse = await postJson(`${serve.url}/v1/runs`, body);
      const runId = sse.headers.get("x-run-id")!;
      const viaSse = await sseEvents(sse);
      assertNoSecret(JSON.stringify(viaSse), `SSE (${name})`);
      assert.equal(deltaText(viaSse), SHOWN, `SSE (${name})`);

      const ndjson = await postJson(`${serve.url}/v1/runs`, body, {
        accept: "application/x-ndjson",
      });
      const viaNdjson = await jsonLines(ndjson) as unknown as RunEvent[];
      assertNoSecret(JSON.stringify(viaNdjson), `NDJSON (${name})`);
      assert.equal(deltaText(viaNdjson), SHOWN, `NDJSON (${name})`);

      const query = new URLSearchParams({ "acp-command": agent(parts) });
      const n8n = await postJson(`${serve.url}/v1/webhooks/n8n?${query}`, {
        chatInput: "hi",
      });
      const items = await jsonLines(n8n);
      assertNoSecret(JSON.stringify(items), `n8n (${name})`);
      assert.equal(
        items.filter((item) => item.type === "item").map((item) => item.content)
          .join(""),
        SHOWN,
        `n8n (${name})`,
      );

      const stored = await (await apiFetch(`${serve.url}/v1/runs/${runId}`))
        .json();
      // (The run's config holds the agent command, and so the pieces.)
      assertNoSecret(JSON.stringify(stored.events), `the store (${name})`);
      assert.equal(deltaText(stored.events), SHOWN);
      const full = await (await apiFetch(
        `${serve.url}/v1/runs/${runId}?all_content=true`,
      )).json();
      assertNoSecret(JSON.stringify(full.events), `all_content (${name})`);
      assert.equal(
        full.events.findLast((e: { type: string }) =>
          e.type === "message.completed"
        ).data.message.content,
        SHOWN,
      );
    }
  });
});

Deno.test("runner run: values are secrets by their names (secret-env-names too), also when split over chunks", async () => {
  // ORBIT_CODE looks harmless, so only the operator's list makes it secret;
  // REGION's value is an ordinary word and stays in the answer.
  const declared = "orbit-7f3a-9c1e-4b2d";
  const region = "europe-north-42";
  const parts = ["say orbit-7f3a", "-9c1e-4b2d in europe-", "north-42 now"];
  const dataDir = tempDir();
  const args = cliArgs(dataDir, parts, "--json").map((arg) =>
    arg === ENV_JSON
      ? JSON.stringify({ ORBIT_CODE: declared, REGION: region })
      : arg
  );
  const shown = `say [REDACTED] in ${region} now`;
  const plain = await runCli(args);
  assert.equal(plain.code, 0, plain.stderr);
  const leaked = parseJsonLines(plain.stdout) as unknown as RunEvent[];
  assert.equal(deltaText(leaked), `say ${declared} in ${region} now`);

  const declaredArgs = [...args];
  declaredArgs.splice(
    args.indexOf("hi"),
    0,
    "--secret-env-names",
    "ORBIT_CODE",
  );
  const json = await runCli(declaredArgs);
  assert.equal(json.code, 0, json.stderr);
  assert.ok(!json.stdout.includes("orbit-7f3a"), "a piece of the secret");
  const events = parseJsonLines(json.stdout) as unknown as RunEvent[];
  assert.equal(deltaText(events), shown);
  const store = await openStore({ dataDir });
  try {
    const [latest] = await store.listRuns({ limit: 1 });
    const stored = await store.getEvents(latest.runId);
    assert.ok(!JSON.stringify(stored).includes("orbit-7f3a"), "the store");
    assert.equal(deltaText(stored), shown);
  } finally {
    await store.close();
  }
});
