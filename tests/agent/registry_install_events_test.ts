/**
 * A run that waits for its registry agent's download: its callers see
 * `agent.installing` events while the archive arrives (`runner serve`'s
 * stream, `runner run --json`), all before the agent's first output; the
 * next run of the agent installs nothing.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { RunEvent } from "../../lib/events.ts";
import { parseJsonLines, runCli, tempDir } from "../helpers.ts";
import {
  apiFetch,
  deltaText,
  postJson,
  type ServeProcess,
  sseEvents,
  terminals,
  withServe,
} from "../serve_test_helpers.ts";
import { fixtureAgentArchive } from "./registry_archives.ts";
import {
  type HeldAgentListing,
  listFixtureAgent,
  listHeldFixtureAgent,
  serveRegistry,
  type TestRegistry,
} from "./registry_server.ts";

const ANSWER = ["--text", "answer of the installed agent"];

/**
 * Runs `test` against a `runner serve` whose registry is `registry`, with a
 * run body for `provider`; closes the registry after.
 */
async function withRegistryServe(
  registry: TestRegistry,
  provider: string,
  test: (serve: ServeProcess, body: Record<string, unknown>) => Promise<void>,
): Promise<void> {
  try {
    await withServe({
      // A registry id is a command the operator allows.
      args: ["--allow-custom-commands"],
      env: { RUNNER_REGISTRY_URL: registry.registryUrl },
    }, async (serve, dir) => {
      await test(serve, {
        input: { text: "hi" },
        config: { provider, workspace: join(dir, "ws") },
      });
    });
  } finally {
    await registry.close();
  }
}

/**
 * {@linkcode withRegistryServe} on a fresh registry whose only agent is the
 * held fixture agent `listing` (answering {@linkcode ANSWER}); its download
 * is released after `test`, passed or not.
 */
async function withHeldAgentServe(
  listing: Omit<HeldAgentListing, "args">,
  test: (
    serve: ServeProcess,
    body: Record<string, unknown>,
    held: { registry: TestRegistry; archive: Uint8Array; release: () => void },
  ) => Promise<void>,
): Promise<void> {
  const registry = serveRegistry();
  const held = await listHeldFixtureAgent(registry, {
    ...listing,
    args: ANSWER,
  });
  try {
    await withRegistryServe(
      registry,
      listing.id,
      (serve, body) => test(serve, body, { registry, ...held }),
    );
  } finally {
    held.release();
  }
}

/** Checks that the run's install events come first, in order, and end with the whole archive. */
function assertInstalledFirst(
  events: RunEvent[],
  expected: { id: string; version: string; size: number },
): void {
  const installing = events.filter((event) =>
    event.type === "agent.installing"
  );
  assert.ok(installing.length >= 2, JSON.stringify(events.map((e) => e.type)));
  const firstOther = events.findIndex((event) =>
    event.type !== "agent.installing"
  );
  assert.equal(firstOther, installing.length, "install events come first");
  assert.equal(events[firstOther].type, "run.started");
  const firstDelta = events.findIndex((event) =>
    event.type === "message.delta"
  );
  assert.ok(firstDelta > firstOther);
  let received = -1;
  for (const event of installing) {
    assert.equal(event.data.id, expected.id);
    assert.equal(event.data.version, expected.version);
    assert.equal(event.data.total, expected.size);
    assert.ok(Number(event.data.received) > received);
    received = Number(event.data.received);
  }
  assert.equal(received, expected.size);
  assert.deepEqual(
    events.map((event) => event.sequence),
    events.map((_, index) => index + 1),
  );
}

Deno.test("runner serve: a run that downloads its agent streams agent.installing events while it waits, before the agent's output; the next run installs nothing", async () => {
  // The download stops half-way until the caller has seen progress: the
  // events must reach it while the run waits, not after.
  const listing = { id: "big-agent", file: "big.tar.gz", padding: 3 << 20 };
  await withHeldAgentServe(listing, async (serve, body, held) => {
    const { registry, archive, release: seen } = held;
    const response = await postJson(`${serve.url}/v1/runs`, body);
    assert.equal(response.status, 200);
    const events = await sseEvents(response, (event) => {
      if (event.type === "agent.installing") seen();
    });
    const [last] = terminals(events);
    assert.equal(last.type, "run.completed", JSON.stringify(last));
    assert.match(deltaText(events), /answer of the installed agent/);
    assertInstalledFirst(events, {
      id: "big-agent",
      version: "1.0.0",
      size: archive.length,
    });
    // The stored events are the streamed ones.
    const runId = events[0].run_id;
    const stored = await (await apiFetch(
      `${serve.url}/v1/runs/${runId}/events?stream=false`,
    )).json();
    assert.deepEqual(
      (stored.events as RunEvent[]).map((event) => event.type),
      events.map((event) => event.type),
    );

    const second = await sseEvents(
      await postJson(`${serve.url}/v1/runs`, body),
    );
    assert.equal(terminals(second)[0].type, "run.completed");
    assert.equal(second[0].type, "run.started");
    assert.ok(!second.some((event) => event.type === "agent.installing"));
    assert.equal(registry.hits.get("/files/big.tar.gz"), 1);
  });
});

Deno.test("runner run --json prints agent.installing events before the agent's output; the second run downloads nothing", async () => {
  const registry = serveRegistry();
  const archive = await fixtureAgentArchive({ padding: 2 * 1024 * 1024 });
  listFixtureAgent(registry, {
    id: "big-agent",
    file: "big.tar.gz",
    archive,
    args: ANSWER,
  });
  try {
    const env = {
      RUNNER_DATA_DIR: tempDir(),
      RUNNER_REGISTRY_URL: registry.registryUrl,
    };
    const args = ["run", "big-agent", "--json", "--workspace", tempDir(), "hi"];
    const first = await runCli(args, { env });
    assert.equal(first.code, 0, first.stderr);
    const events = parseJsonLines(first.stdout) as unknown as RunEvent[];
    assertInstalledFirst(events, {
      id: "big-agent",
      version: "1.0.0",
      size: archive.length,
    });
    const second = await runCli(args, { env });
    assert.equal(second.code, 0, second.stderr);
    const again = parseJsonLines(second.stdout) as unknown as RunEvent[];
    assert.equal(again[0].type, "run.started");
    assert.ok(!again.some((event) => event.type === "agent.installing"));
    assert.equal(registry.hits.get("/files/big.tar.gz"), 1);
  } finally {
    await registry.close();
  }
});

Deno.test("runner serve: a run cancelled while its agent downloads ends at once as cancelled; the install finishes and the next run uses it", async () => {
  const listing = { id: "slow-agent", file: "big.tar.gz", padding: 2 << 20 };
  await withHeldAgentServe(listing, async (serve, body, held) => {
    const { registry, release } = held;
    const response = await postJson(`${serve.url}/v1/runs`, body);
    const events = await sseEvents(response, async (event, seen) => {
      if (event.type === "agent.installing" && seen.length === 1) {
        const cancel = await postJson(
          `${serve.url}/v1/runs/${event.run_id}/cancel`,
          {},
        );
        assert.ok(cancel.ok, String(cancel.status));
        await cancel.body?.cancel();
      }
    });
    // The download is still held: the run ended without waiting for it.
    const [last] = terminals(events);
    assert.equal(last.type, "run.failed");
    assert.equal(last.data.code, "run.cancelled");
    assert.ok(!events.some((event) => event.type === "run.started"));
    release();

    const second = await sseEvents(
      await postJson(`${serve.url}/v1/runs`, body),
    );
    assert.equal(terminals(second)[0].type, "run.completed");
    assert.match(deltaText(second), /answer of the installed agent/);
    assert.equal(registry.hits.get("/files/big.tar.gz"), 1);
  });
});
