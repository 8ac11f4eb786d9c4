/**
 * `/openapi.json` of a real `runner serve` is a valid OpenAPI 3.1 document,
 * and every route's real answers (successes and errors, streamed or not)
 * match it: status, content type, required headers and body.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { runConfigJsonSchema } from "../../lib/server/openapi/config.ts";
import { createContract } from "../openapi_contract.ts";
import {
  apiFetch,
  fixtureConfig,
  makeFifo,
  openGate,
  readSse,
  type ServeProcess,
  withServe,
} from "../serve_test_helpers.ts";

const TOKEN = "contract-token-0123456789abcdef";

Deno.test("/openapi.json validates as OpenAPI 3.1 and its run config carries types, defaults, enums and descriptions", async () => {
  await withServe({}, async (serve) => {
    const document = await (await apiFetch(`${serve.url}/openapi.json`)).json();
    const result = await new Validator().validate(document);
    assert.ok(result.valid, JSON.stringify(result.errors, null, 2));
    assert.equal(document.openapi, "3.1.0");
    const config = document.components.schemas.RunConfig as {
      properties: Record<string, Record<string, unknown>>;
    };
    assert.deepEqual({ ...config }, runConfigJsonSchema());
    assert.deepEqual(config.properties.location.enum, [
      "local",
      "remote-ssh",
      "daemon",
    ]);
    assert.equal(config.properties["cancel-grace"].maximum, 5);
    assert.equal(config.properties["timeout"].default, 600);
    for (const [key, schema] of Object.entries(config.properties)) {
      if (key === "advanced-settings") continue;
      assert.ok(
        (schema as { description?: string }).description,
        `${key} has no description`,
      );
      assert.notDeepEqual(schema, {}, `${key} has an empty schema`);
    }
    const operationIds = Object.values(document.paths).flatMap((methods) =>
      Object.values(methods as Record<string, { operationId?: string }>).map(
        (op) => op.operationId,
      )
    );
    assert.equal(operationIds.length, 29);
    assert.equal(new Set(operationIds).size, 29);
    assert.ok(operationIds.every(Boolean));
  });
});

/** A fetch with the API token and JSON. */
function api(serve: ServeProcess) {
  return (path: string, init: RequestInit & { json?: unknown } = {}) =>
    apiFetch(`${serve.url}${path}`, {
      ...init,
      method: init.method ?? (init.json === undefined ? "GET" : "POST"),
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(init.json === undefined
          ? {}
          : { "content-type": "application/json" }),
        ...init.headers as Record<string, string>,
      },
      body: init.json === undefined ? init.body : JSON.stringify(init.json),
    });
}

Deno.test("every route's real answers match /openapi.json", async () => {
  await withServe({
    args: [
      "--api-token",
      TOKEN,
      "--allow-custom-commands",
      "--max-concurrent-runs",
      "2",
      "--max-body-mb",
      "1",
      "--n8n-wait-seconds",
      "0",
      "--daemon-enabled",
      "--daemon-port",
      "0",
    ],
  }, async (serve, dir) => {
    const document = await (await apiFetch(`${serve.url}/openapi.json`)).json();
    const contract = createContract(document);
    const call = api(serve);
    const config = fixtureConfig(join(dir, "ws"));
    const finished = (runId: string) =>
      serve.waitForLog((entry) =>
        entry.msg === "run finished" && entry.run_id === runId
      );

    // Meta routes.
    await contract.check(
      "GET /healthz",
      await apiFetch(`${serve.url}/healthz`),
    );
    await contract.check(
      "GET /metrics",
      await apiFetch(`${serve.url}/metrics`),
    );
    await contract.check(
      "GET /openapi.json",
      await apiFetch(`${serve.url}/openapi.json`),
    );

    // Starting runs: SSE, NDJSON, one document.
    const sse = await call("/v1/runs", {
      json: { run_id: "c-1", conversation_id: "conv-c", input: "hi", config },
    });
    await contract.check("POST /v1/runs", sse);
    await finished("c-1");
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", {
        json: { input: { text: "lines" }, config },
        headers: { accept: "application/x-ndjson" },
      }),
    );
    const whole = await contract.check(
      "POST /v1/runs",
      await call("/v1/runs?stream=false", {
        json: { conversation_id: "conv-c", input: "again", config },
      }),
    ) as { run_id: string };
    await finished(whole.run_id);

    // Reading runs.
    await contract.check("GET /v1/runs", await call("/v1/runs"));
    await contract.check("GET /v1/runs", await call("/v1/runs?status=nope"));
    await contract.check("GET /v1/runs/{id}", await call("/v1/runs/c-1"));
    await contract.check("GET /v1/runs/{id}", await call("/v1/runs/none"));
    await contract.check(
      "GET /v1/runs/{id}",
      await call("/v1/runs/c-1?all_content=true"),
    );
    await contract.check(
      "GET /v1/runs/{id}",
      await call("/v1/runs/c-1?all_content=maybe"),
    );
    for (
      const [query, headers] of [
        ["", {}],
        ["", { accept: "application/x-ndjson" }],
        ["?stream=false", {}],
        ["?stream=false&all_content=true", {}],
        ["?after=1&all_content=true", {}],
        ["?after=-1", {}],
      ] as Array<[string, Record<string, string>]>
    ) {
      await contract.check(
        "GET /v1/runs/{id}/events",
        await call(`/v1/runs/c-1/events${query}`, { headers }),
      );
    }
    await contract.check(
      "GET /v1/runs/{id}/events",
      await call("/v1/runs/c-1/events", {
        headers: { "last-event-id": "999" },
      }),
    );
    await contract.check(
      "GET /v1/runs/{id}/events",
      await call("/v1/runs/none/events"),
    );

    // While two gated runs are active: steer, queue, busy, too many.
    const gates = [join(dir, "gate-a"), join(dir, "gate-b")];
    for (const gate of gates) await makeFifo(gate);
    const held = await Promise.all(gates.map((gate, index) =>
      call("/v1/runs", {
        json: {
          run_id: `held-${index}`,
          conversation_id: `conv-held-${index}`,
          input: "wait",
          config: fixtureConfig(join(dir, "ws"), ["--gate-fifo", gate]),
        },
      })
    ));
    await Promise.all(
      ["held-0", "held-1"].map((runId) =>
        serve.waitForLog((entry) =>
          entry.msg === "run started" && entry.run_id === runId
        )
      ),
    );
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", {
        json: { conversation_id: "conv-held-0", input: "steer", config },
      }),
    );
    await contract.check(
      "POST /v1/runs/{id}/input",
      await call("/v1/runs/held-0/input", { json: { text: "more" } }),
    );
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", { json: { input: "third", config } }),
    );
    await contract.check(
      "DELETE /v1/conversations/{id}",
      await call("/v1/conversations/conv-held-1", { method: "DELETE" }),
    );
    await contract.check(
      "POST /v1/webhooks/n8n",
      await call("/v1/webhooks/n8n", {
        json: { chatInput: "busy", conversation_id: "conv-held-1" },
      }),
    );
    await contract.check(
      "POST /v1/runs/{id}/cancel",
      await call("/v1/runs/held-1/cancel", { method: "POST" }),
    );
    await openGate(gates[0]);
    await openGate(gates[0]);
    await openGate(gates[0]);
    for (const response of held) {
      await contract.check("POST /v1/runs", response);
    }
    await finished("held-0");

    // Refused requests.
    await contract.check(
      "POST /v1/runs",
      await fetch(`${serve.url}/v1/runs`, { method: "POST", body: "{}" }),
    );
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", { json: { input: "x", config: { timeout: -1 } } }),
    );
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", {
        json: {
          input: "x",
          config: { ...config, "langbot-assets-gateway-host": "0.0.0.0" },
        },
      }),
    );
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", {
        json: { run_id: "c-1", conversation_id: "elsewhere", input: "x" },
      }),
    );
    await contract.check(
      "POST /v1/runs",
      await call("/v1/runs", {
        json: { input: "x".repeat(2 * 1024 * 1024), config },
      }),
    );
    await contract.check(
      "POST /v1/runs/{id}/input",
      await call("/v1/runs/c-1/input", { json: { text: "late" } }),
    );
    await contract.check(
      "POST /v1/runs/{id}/input",
      await call("/v1/runs/none/input", { json: { text: "x" } }),
    );
    await contract.check(
      "POST /v1/runs/{id}/input",
      await call("/v1/runs/c-1/input", { json: { input: 5 } }),
    );
    await contract.check(
      "POST /v1/runs/{id}/cancel",
      await call("/v1/runs/none/cancel", { method: "POST" }),
    );

    // For people: the console page and permission answers.
    await contract.check("GET /", await apiFetch(`${serve.url}/`));
    for (
      const path of ["/console/marked.js", "/console/purify.js", "/favicon.ico"]
    ) {
      await contract.check(`GET ${path}`, await apiFetch(serve.url + path));
    }
    await contract.check(
      "GET /console/app/{file}",
      await apiFetch(`${serve.url}/console/app/main.js`),
    );
    await contract.check(
      "GET /console/app/{file}",
      await call("/console/app/nope.js"),
    );
    const asked = await call("/v1/runs", {
      json: {
        input: "write",
        config: {
          ...fixtureConfig(join(dir, "ws"), ["--permission"]),
          "permission-decision": "ask",
        },
      },
    });
    const askedEvents = readSse(asked.body!);
    let requested: { run_id: string; data: { request_id: string } } | undefined;
    for await (const message of askedEvents) {
      if (message.event === "permission.requested") {
        requested = JSON.parse(message.data);
        break;
      }
    }
    const answerPath = (runId: string, requestId: string) =>
      `/v1/runs/${runId}/permissions/${requestId}`;
    const answerRoute = "POST /v1/runs/{id}/permissions/{request_id}";
    await contract.check(
      answerRoute,
      await call(answerPath(requested!.run_id, requested!.data.request_id), {
        json: { decision: "allow_once" },
      }),
    );
    for await (const _ of askedEvents) { /* to the terminal event */ }
    await contract.check(
      answerRoute,
      await call(answerPath(requested!.run_id, "gone"), {
        json: { decision: "allow_once" },
      }),
    );
    await contract.check(
      answerRoute,
      await call(answerPath("none", "x"), { json: { decision: "allow_once" } }),
    );
    await contract.check(
      answerRoute,
      await call(answerPath("none", "x"), { json: {} }),
    );

    // Operator routes.
    await contract.check("GET /v1/providers", await call("/v1/providers"));
    await contract.check("GET /v1/daemons", await call("/v1/daemons"));
    await contract.check(
      "POST /v1/daemons/{id}/unfence",
      await call("/v1/daemons/laptop/unfence", { method: "POST" }),
    );
    await contract.check(
      "GET /v1/conversations/{id}",
      await call("/v1/conversations/conv-c"),
    );
    await contract.check(
      "GET /v1/conversations/{id}",
      await call("/v1/conversations/unknown"),
    );
    await contract.check(
      "GET /v1/conversations/{id}",
      await call("/v1/conversations/bad%20id"),
    );
    // Transcripts: Markdown, JSON, and the JSON imported back (refused here:
    // its runs are stored already; a foreign document is a bad request).
    const transcriptRoute = "GET /v1/conversations/{id}/transcript";
    await contract.check(
      transcriptRoute,
      await call("/v1/conversations/conv-c/transcript"),
    );
    const exported = await contract.check(
      transcriptRoute,
      await call("/v1/conversations/conv-c/transcript?format=json"),
    ) as { runs: Array<{ run_id: string; events: unknown[] }> };
    await contract.check(
      transcriptRoute,
      await call("/v1/conversations/unknown/transcript"),
    );
    await contract.check(
      "GET /v1/runs/{id}/transcript",
      await call(`/v1/runs/${exported.runs[0].run_id}/transcript?format=json`),
    );
    await contract.check(
      "GET /v1/runs/{id}/transcript",
      await call("/v1/runs/none/transcript"),
    );
    const importRoute = "POST /v1/conversations/import";
    await contract.check(
      importRoute,
      await call("/v1/conversations/import", { json: exported }),
    );
    await contract.check(
      importRoute,
      await call("/v1/conversations/import", { json: { format: "other" } }),
    );
    await contract.check(
      importRoute,
      await call("/v1/conversations/import", {
        json: {
          ...exported,
          conversation: { conversation_id: "conv-moved", usage: null },
          runs: exported.runs.map((run) => ({
            ...run,
            run_id: `moved-${run.run_id}`,
            conversation_id: "conv-moved",
          })),
        },
      }),
    );
    // The warm pool: conv-c's agent stayed warm after its second run.
    const { agents } = await contract.check(
      "GET /v1/agents",
      await call("/v1/agents"),
    ) as { agents: Array<{ agent_id: string; conversation_id: string }> };
    const warm = agents.find((agent) => agent.conversation_id === "conv-c");
    assert.ok(warm, `no warm agent of conv-c in ${JSON.stringify(agents)}`);
    for (const status of [200, 404]) {
      const stop = await call(`/v1/agents/${warm.agent_id}`, {
        method: "DELETE",
      });
      assert.equal(stop.status, status, "stopped, then gone");
      await contract.check("DELETE /v1/agents/{id}", stop);
    }
    await contract.check(
      "DELETE /v1/conversations/{id}",
      await call("/v1/conversations/conv-c", { method: "DELETE" }),
    );

    // The n8n webhook: stream, one object, failures, refusals.
    const n8n = (query: string, body: unknown) =>
      call(`/v1/webhooks/n8n${query}`, { json: body });
    const base = `?provider=custom&workspace=${
      encodeURIComponent(join(dir, "ws"))
    }`;
    await contract.check(
      "POST /v1/webhooks/n8n",
      await n8n(
        `${base}&acp-command=${
          encodeURIComponent(String(config["acp-command"]))
        }`,
        { chatInput: "hi", conversation_id: "conv-n8n" },
      ),
      { lines: true },
    );
    const crashing = encodeURIComponent(
      String(fixtureConfig(dir, ["--exit-mid-prompt"])["acp-command"]),
    );
    await contract.check(
      "POST /v1/webhooks/n8n",
      await n8n(`${base}&acp-command=${crashing}&errors=json`, {
        chatInput: "boom",
      }),
      { lines: true },
    );
    for (const errors of ["item", "json"]) {
      await contract.check(
        "POST /v1/webhooks/n8n",
        await n8n(
          `${base}&acp-command=${crashing}&stream=false&errors=${errors}`,
          { chatInput: "boom" },
        ),
      );
    }
    await contract.check("POST /v1/webhooks/n8n", await n8n("", {}));
    await contract.check(
      "POST /v1/webhooks/n8n",
      await n8n("?langbot-assets-gateway-port=1", { chatInput: "x" }),
    );
    await contract.check(
      "POST /v1/webhooks/n8n",
      await fetch(`${serve.url}/v1/webhooks/n8n`, {
        method: "POST",
        body: JSON.stringify({ chatInput: "x" }),
      }),
    );

    // /acp: initialize, a request accepted for the stream, the stream, the end.
    const acpUrl = `${serve.url}/acp?${new URLSearchParams({
      provider: "custom",
      "acp-command": String(config["acp-command"]),
      workspace: String(config.workspace),
    })}`;
    const acpHeaders = (connectionId?: string): Record<string, string> => ({
      authorization: `Bearer ${TOKEN}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(connectionId ? { "acp-connection-id": connectionId } : {}),
    });
    const acpInitialized = await fetch(acpUrl, {
      method: "POST",
      headers: acpHeaders(),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: 1 },
      }),
    });
    const acpConnection = acpInitialized.headers.get("acp-connection-id")!;
    await contract.check("POST /acp", acpInitialized);
    const acpStream = fetch(acpUrl, { headers: acpHeaders(acpConnection) });
    await contract.check(
      "POST /acp",
      await fetch(acpUrl, {
        method: "POST",
        headers: acpHeaders(acpConnection),
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 2,
          method: "session/list",
          params: {},
        }),
      }),
    );
    const acpStreamed = await acpStream;
    await contract.check(
      "DELETE /acp",
      await fetch(acpUrl, {
        method: "DELETE",
        headers: acpHeaders(acpConnection),
      }),
    );
    await contract.check("GET /acp", acpStreamed);

    // Every operation was checked with a success status.
    const operations = Object.entries(document.paths).flatMap((
      [path, methods],
    ) =>
      Object.keys(methods as object).map((m) => `${m.toUpperCase()} ${path}`)
    );
    for (const operation of operations) {
      const statuses = [...contract.seen.get(operation) ?? []];
      assert.ok(
        statuses.some((status) => status < 300),
        `${operation} was not checked with a success (saw ${statuses})`,
      );
    }
  });
});
