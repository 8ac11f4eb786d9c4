/**
 * The guard functions, held by their near-misses, not only the obvious bad
 * case: wrong, empty, prefixed and suffixed secrets, upper case; the same
 * host on another port; suffix look-alikes of an allowed name; trailing dots
 * and IPv6 forms; option-like values that reach a command line; paths next
 * to the workspace. The end-to-end checks of each family through a real
 * `runner serve` live in serve_hostile_test.ts (Host, Origin),
 * serve_auth_test.ts (API token), server/n8n_test.ts (n8n auth),
 * hub_hostile_test.ts (daemon tokens), fleet_test.ts (cluster token),
 * assets/bridge_test.ts (run tokens) and run_fs_test.ts (fs/*).
 *
 * @module
 */

import assert from "node:assert/strict";
import { Hono } from "hono";
import { sign } from "hono/jwt";
import { isInside } from "../../lib/acp/fs.ts";
import { createTokenRegistry } from "../../lib/assets/tokens.ts";
import { parseRunConfig } from "../../lib/config.ts";
import { RunnerError } from "../../lib/errors.ts";
import {
  checkListenerToken,
  isLoopbackHost,
  tokenProblem,
} from "../../lib/hub/token_rules.ts";
import type { N8nSettings } from "../../lib/server/config/serve_config.ts";
import {
  CLUSTER_TOKEN_HEADER,
  createFleetRouter,
} from "../../lib/server/fleet_router.ts";
import { checkN8nAuth } from "../../lib/server/n8n/auth.ts";
import { resolveCallerConfig } from "../../lib/server/policy.ts";
import {
  checkRequestSource,
  hostAllowed,
  originAllowed,
  type RequestGuardSettings,
} from "../../lib/server/request_guard.ts";
import type { FleetStore } from "../../lib/store/fleet.ts";

const SETTINGS: RequestGuardSettings = {
  checkHost: true,
  listenHost: "devbox.lan",
  allowedHosts: ["*.example.com", "runner.internal"],
  allowedOrigins: ["https://console.example.com"],
};

Deno.test("Host: a *.name pattern takes its subdomains only, never the name itself or a look-alike", () => {
  for (
    const host of [
      "a.example.com",
      "a.b.example.com",
      "A.EXAMPLE.COM:8080",
      "a.example.com.", // the absolute form of the same name
      "a.example.com.:443",
      "runner.internal",
      "Runner.Internal:80",
      "devbox.lan.",
      "localhost.:8080",
      "[::1]:8080",
      "[::ffff:127.0.0.1]:8080",
      "127.0.0.1",
    ]
  ) {
    assert.ok(hostAllowed(host, SETTINGS), `refused ${host}`);
  }
  for (
    const host of [
      "example.com",
      "example.com:8080",
      "notexample.com",
      "aexample.com",
      "example.com.evil.test",
      "a.example.com.evil.test",
      "a.example.co",
      "a.example.comm",
      "a.example.com..",
      "runner.internal.evil.test",
      "evilrunner.internal",
      "runner.internals",
      "devbox.lan.evil.test",
      "localhost.evil.test",
      "127.0.0.1.evil.test",
      "",
      ":8080",
      "[::1",
    ]
  ) {
    assert.ok(!hostAllowed(host, SETTINGS), `accepted ${host}`);
  }
});

Deno.test("Origin: the same host on another port is another site; so are another scheme's port, a look-alike and null", () => {
  const host = "127.0.0.1:8080";
  for (
    const origin of [
      "http://127.0.0.1:8080",
      "HTTP://127.0.0.1:8080",
      "https://console.example.com",
      "https://console.example.com:443",
      "https://CONSOLE.example.com",
    ]
  ) {
    assert.ok(originAllowed(origin, host, SETTINGS), `refused ${origin}`);
  }
  for (
    const origin of [
      "http://127.0.0.1:3000", // another local dev server's page
      "http://127.0.0.1", // port 80
      "http://127.0.0.1:80",
      "http://localhost:8080", // another name than the Host the request names
      "http://127.0.0.1:8080.evil.test",
      "https://console.example.com:8443",
      "http://console.example.com",
      "https://console.example.com.evil.test",
      "https://evilconsole.example.com",
      "https://example.com",
      "null",
      "",
      "not a url",
    ]
  ) {
    assert.ok(!originAllowed(origin, host, SETTINGS), `accepted ${origin}`);
  }
  // IPv6 and upper-case Host values.
  assert.ok(originAllowed("http://[::1]:8080", "[::1]:8080", SETTINGS));
  assert.ok(!originAllowed("http://[::1]:3000", "[::1]:8080", SETTINGS));
  assert.ok(originAllowed("http://localhost:8080", "LOCALHOST:8080", SETTINGS));
  // No Host: only the list decides.
  assert.ok(!originAllowed("http://127.0.0.1:8080", undefined, SETTINGS));
  // "*" allows any page, but an opaque origin is no page's.
  const any = { ...SETTINGS, allowedOrigins: ["*"] };
  assert.ok(originAllowed("https://anything.test:1", host, any));
  assert.ok(!originAllowed("null", host, any));
});

Deno.test("checkRequestSource: the Origin rule holds with the Host check off; Sec-Fetch-Site in any case", () => {
  const refused = (headers: Parameters<typeof checkRequestSource>[0]) =>
    assert.throws(
      () => checkRequestSource(headers, { ...SETTINGS, checkHost: false }),
      (error) =>
        error instanceof RunnerError &&
        error.code === "http.origin_not_allowed",
      JSON.stringify(headers),
    );
  refused({ host: "runner:8080", origin: "http://runner:3000" });
  refused({ host: "127.0.0.1:8080", origin: "http://127.0.0.1:3000" });
  refused({ host: "127.0.0.1:8080", secFetchSite: "cross-site" });
  refused({ host: "127.0.0.1:8080", secFetchSite: "Cross-Site" });
  for (const site of ["same-origin", "same-site", "none", undefined]) {
    checkRequestSource({ host: "127.0.0.1:8080", secFetchSite: site }, {
      ...SETTINGS,
      checkHost: false,
    });
  }
  checkRequestSource(
    { host: "127.0.0.1:8080", origin: "http://127.0.0.1:8080" },
    SETTINGS,
  );
});

const GOOD_TOKEN = "Zq8Wm3Lx7Vt2Nb5Rc9Hd4Jf6Kp1Ys0Ge";

Deno.test("token rules: short, padded, low-variety and published tokens are refused, off loopback and on", () => {
  assert.equal(tokenProblem(GOOD_TOKEN), undefined);
  for (
    const token of [
      "",
      GOOD_TOKEN.slice(0, 31), // one character short
      ` ${GOOD_TOKEN}`,
      `${GOOD_TOKEN}\n`,
      "ab".repeat(20), // long, two characters
      "abcdefghijk".repeat(4), // eleven distinct
      "golden-token-7f3a9c2e5b1d4f6a8c0e2b4d6f8a",
    ]
  ) {
    assert.notEqual(tokenProblem(token), undefined, JSON.stringify(token));
  }
  for (
    const host of ["127.0.0.1", "127.1.2.3", "localhost", "LOCALHOST", "::1"]
  ) {
    assert.ok(isLoopbackHost(host), host);
    assert.ok(isLoopbackHost(host.includes(":") ? `[${host}]` : host), host);
  }
  for (
    const host of [
      "0.0.0.0",
      "::",
      "",
      "127.0.0.1.nip.io",
      "localhost.evil.test",
      "128.0.0.1",
      "1127.0.0.1",
      "::2",
      "198.51.100.10",
    ]
  ) {
    assert.ok(!isLoopbackHost(host), `${host} counted as loopback`);
  }
  const refused = (token: string | undefined, host: string) =>
    assert.throws(
      () => checkListenerToken({ token, host, purpose: "--api-token" }),
      (error) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        (token === undefined || token === "" ||
          !error.message.includes(token)),
      `${JSON.stringify(token)} on ${host}`,
    );
  refused(undefined, "0.0.0.0");
  refused("", "0.0.0.0");
  refused("", "::");
  refused(`${GOOD_TOKEN} `, "0.0.0.0");
  refused(`${GOOD_TOKEN} `, "127.0.0.1"); // a given token is checked on loopback too
  refused("short-token", "127.0.0.1");
  checkListenerToken({ host: "127.0.0.1", purpose: "--api-token" });
  checkListenerToken({ token: GOOD_TOKEN, host: "0.0.0.0", purpose: "x" });
});

Deno.test("the cluster token: only the exact token marks a request as forwarded by a replica", async () => {
  const router = createFleetRouter({
    // The check reads no fleet state.
    fleet: {} as FleetStore,
    clusterToken: GOOD_TOKEN,
    log: () => {},
  });
  const app = new Hono().get("/", (c) => c.text(String(router.isForwarded(c))));
  // Answered either way: a check that throws is no "not forwarded".
  const forwarded = async (headers: Record<string, string>) => {
    const response = await app.request("/", { headers });
    assert.equal(response.status, 200, JSON.stringify(headers));
    return await response.text() === "true";
  };
  assert.ok(await forwarded({ [CLUSTER_TOKEN_HEADER]: GOOD_TOKEN }));
  for (
    const value of [
      "",
      " ",
      "x",
      GOOD_TOKEN.slice(0, -1),
      `${GOOD_TOKEN}x`,
      GOOD_TOKEN.toLowerCase(),
      GOOD_TOKEN.toUpperCase(),
      `Bearer ${GOOD_TOKEN}`,
      "Yq8Wm3Lx7Vt2Nb5Rc9Hd4Jf6Kp1Ys0Ge", // same length, one letter off
    ]
  ) {
    assert.ok(
      !await forwarded({ [CLUSTER_TOKEN_HEADER]: value }),
      `accepted ${JSON.stringify(value)}`,
    );
  }
  assert.ok(!await forwarded({}));
  assert.ok(!await forwarded({ authorization: `Bearer ${GOOD_TOKEN}` }));
});

/** What the webhook answers `headers` under `settings`: 200, or 401. */
async function n8nStatus(
  settings: Partial<N8nSettings>,
  headers: Record<string, string>,
): Promise<number> {
  const app = new Hono().post("/", async (c) => {
    try {
      await checkN8nAuth(c, settings as N8nSettings);
    } catch (error) {
      if (error instanceof RunnerError && error.code === "http.unauthorized") {
        return c.text("no", 401);
      }
      throw error;
    }
    return c.text("ok");
  });
  return (await app.request("/", { method: "POST", headers })).status;
}

Deno.test("n8n basic and header auth: wrong, empty, extended or differently cased credentials are 401", async () => {
  const basic = { auth: "basic" as const, user: "bot", password: "pw-123456" };
  const as = (text: string) => ({ authorization: `Basic ${btoa(text)}` });
  assert.equal(await n8nStatus(basic, as("bot:pw-123456")), 200);
  assert.equal(
    await n8nStatus(basic, { authorization: `basic ${btoa("bot:pw-123456")}` }),
    200,
  );
  for (
    const headers of [
      {},
      { authorization: "" },
      { authorization: "Basic " },
      { authorization: "Basic !!!" },
      as("bot:"),
      as(":pw-123456"),
      as("bot:pw-12345"),
      as("bot:pw-1234567"),
      as("Bot:pw-123456"),
      as("bot:PW-123456"),
      as("bot:pw-123456 "),
      as("bot"),
      { authorization: `Bearer ${btoa("bot:pw-123456")}` },
      { authorization: "Bearer bot:pw-123456" },
    ]
  ) {
    assert.equal(await n8nStatus(basic, headers), 401, JSON.stringify(headers));
  }
  const header = {
    auth: "header" as const,
    headerName: "x-key",
    headerValue: "hv-123456",
  };
  assert.equal(await n8nStatus(header, { "x-key": "hv-123456" }), 200);
  assert.equal(await n8nStatus(header, { "X-Key": "hv-123456" }), 200);
  for (
    const value of ["", "hv-12345", "hv-1234567", "HV-123456", "hv-123456x"]
  ) {
    assert.equal(await n8nStatus(header, { "x-key": value }), 401, value);
  }
  assert.equal(await n8nStatus(header, {}), 401);
  assert.equal(
    await n8nStatus(header, { authorization: "Bearer hv-123456" }),
    401,
  );
});

Deno.test("n8n jwt auth: another secret, no signature, a public-key or unsigned algorithm, expired: 401", async () => {
  const secret = "jwt-secret-123456";
  const jwt = { auth: "jwt" as const, jwtSecret: secret };
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  const good = await sign({ sub: "bot" }, secret, "HS256");
  for (const alg of ["HS256", "HS384", "HS512"] as const) {
    const token = await sign({ sub: "bot" }, secret, alg);
    assert.equal(await n8nStatus(jwt, bearer(token)), 200, alg);
  }
  const [head, body] = good.split(".");
  const unsigned = `${
    btoa(JSON.stringify({ alg: "none", typ: "JWT" })).replace(/=+$/, "")
  }.${body}.`;
  const expired = await sign(
    { sub: "bot", exp: Math.floor(Date.now() / 1000) - 60 },
    secret,
    "HS256",
  );
  const notYet = await sign(
    { sub: "bot", nbf: Math.floor(Date.now() / 1000) + 3600 },
    secret,
    "HS256",
  );
  for (
    const headers of [
      {},
      bearer(""),
      { authorization: good }, // no scheme
      { authorization: `Basic ${good}` },
      bearer(await sign({ sub: "bot" }, "jwt-secret-12345", "HS256")),
      bearer(await sign({ sub: "bot" }, `${secret}x`, "HS256")),
      bearer(`${head}.${body}.`),
      bearer(`${head}.${body}`),
      bearer(`${good}x`),
      bearer(unsigned),
      bearer(expired),
      bearer(notYet),
      bearer(secret),
    ]
  ) {
    assert.equal(await n8nStatus(jwt, headers), 401, JSON.stringify(headers));
  }
});

Deno.test("run tokens: only the exact live token resolves, and only to its own run", () => {
  let now = 1_000;
  const registry = createTokenRegistry<string>({ ttlMs: 100, now: () => now });
  const a = registry.issue("run-a", "backend-a");
  const b = registry.issue("run-b", "backend-b");
  assert.notEqual(a, b);
  assert.equal(registry.resolve(a), "backend-a");
  assert.equal(registry.runIdOf(b), "run-b");
  for (
    const near of [
      undefined,
      "",
      " ",
      a.slice(0, -1),
      `${a}x`,
      ` ${a}`,
      a.toUpperCase() === a ? a.toLowerCase() : a.toUpperCase(),
      `Bearer ${a}`,
    ]
  ) {
    assert.equal(registry.resolve(near), undefined, JSON.stringify(near));
  }
  registry.revoke("run-a");
  assert.equal(registry.resolve(a), undefined, "revoked");
  assert.equal(registry.resolve(b), "backend-b", "another run's token kept");
  now += 99;
  assert.equal(registry.resolve(b), "backend-b", "still inside its ttl");
  now += 1;
  assert.equal(registry.resolve(b), undefined, "expired at its ttl");
});

Deno.test("ssh-target: anything ssh could read as an option is config.invalid up front, from the operator or a caller", () => {
  const base = { provider: "custom", "acp-command": "agent", workspace: "/w" };
  const target = (value: string) => ({
    ...base,
    location: "remote-ssh",
    "ssh-target": value,
  });
  for (
    const value of [
      "-v",
      "-oProxyCommand",
      "--",
      "-",
      "-luser@host",
      "-@host",
      " -v",
      "host -v",
      "host;id",
      "$(id)@host",
      "`id`",
      "host\n-v",
      "user@host/x",
    ]
  ) {
    assert.throws(
      () => parseRunConfig(target(value)),
      (error) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        error.message.includes("ssh-target"),
      JSON.stringify(value),
    );
    assert.throws(
      () =>
        resolveCallerConfig({
          allowCustomCommands: false,
          allowEnvNames: [],
          runDefaults: { provider: "claude", workspace: "/w" },
        }, { location: "remote-ssh", "ssh-target": value }),
      (error) =>
        error instanceof RunnerError && error.code === "config.invalid",
      `caller ${JSON.stringify(value)}`,
    );
  }
  for (
    const value of [
      "host",
      "user@host",
      "user@host-1",
      "host-",
      "u-ser@h.example",
      "user@[::1]",
      "user@fe80::1%eth0",
    ]
  ) {
    assert.equal(parseRunConfig(target(value)).sshTarget, value);
  }
});

Deno.test("fs confinement: a sibling whose name extends the workspace's, or a path that climbs out, is outside", () => {
  const root = "/srv/ws";
  for (
    const path of ["/srv/ws", "/srv/ws/a", "/srv/ws/..a", "/srv/ws/a/../b"]
  ) {
    assert.ok(isInside(root, path), path);
  }
  for (
    const path of [
      "/srv/wsx",
      "/srv/ws-other/a",
      "/srv/ws./a",
      "/srv",
      "/",
      "/srv/ws/../x",
      "/srv/ws/..",
      "/other/srv/ws",
    ]
  ) {
    assert.ok(!isInside(root, path), path);
  }
});
