/**
 * The Host and Origin guard as a caller meets it: the refusals' codes and
 * messages (the name refused, the flag that allows it), which origins get a
 * CORS answer, and how the operator's lists are read (case, spaces, a
 * trailing dot, `*`). The look-alike cases are in
 * `tests/contracts/guards_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import {
  checkRequestSource,
  type GuardedHeaders,
  hostAllowed,
  hostName,
  originAllowed,
  originListed,
  type RequestGuardSettings,
} from "../../lib/server/request_guard.ts";

const SETTINGS: RequestGuardSettings = {
  checkHost: true,
  listenHost: "127.0.0.1",
  allowedHosts: [],
  allowedOrigins: [],
};

function refusal(
  headers: GuardedHeaders,
  settings: RequestGuardSettings = SETTINGS,
): { code: string; message: string } | undefined {
  try {
    checkRequestSource(headers, settings);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof RunnerError, String(error));
    return { code: error.code, message: error.message };
  }
}

Deno.test("a foreign Host and a cross-site page are refused with the name or origin and the flag that allows it", () => {
  assert.deepEqual(refusal({ host: "Rebind.Evil.Test.:8080" }), {
    code: "http.host_not_allowed",
    message:
      'Requests for host "rebind.evil.test" are refused (a guard against DNS rebinding). Call the server by its IP address or localhost, or have the operator allow the name with --allowed-hosts.',
  });
  assert.deepEqual(
    refusal({ host: "127.0.0.1:8080", origin: "http://evil.test" }),
    {
      code: "http.origin_not_allowed",
      message:
        'Requests from the web page origin "http://evil.test" are refused (a guard against cross-site requests). The operator can allow it with --allowed-origins.',
    },
  );
  assert.deepEqual(
    refusal({ host: "127.0.0.1:8080", secFetchSite: "cross-site" }),
    {
      code: "http.origin_not_allowed",
      message:
        "Cross-site browser requests are refused (a guard against cross-site requests). The operator can allow an origin with --allowed-origins.",
    },
  );
  // A foreign Host is refused before its Origin is looked at.
  assert.equal(
    refusal({ host: "evil.test", origin: "http://evil.test" })?.code,
    "http.host_not_allowed",
  );
  // A same-origin page passes even when the browser says cross-site
  // (the Origin decides), and so does a request with no headers at all.
  assert.equal(
    refusal({
      host: "127.0.0.1:8080",
      origin: "http://127.0.0.1:8080",
      secFetchSite: "cross-site",
    }),
    undefined,
  );
  assert.equal(refusal({}), undefined);
});

Deno.test("only the origins the operator listed get a CORS answer, same-origin pages need none", () => {
  const listed = {
    ...SETTINGS,
    allowedOrigins: [" https://Console.Example.com "],
  };
  assert.equal(originListed("https://console.example.com", listed), true);
  assert.equal(originListed("https://console.example.com:443", listed), true);
  assert.equal(originListed("https://console.example.com:8443", listed), false);
  assert.equal(originListed("http://127.0.0.1:8080", listed), false);
  assert.equal(originListed("null", listed), false);
  assert.equal(originListed("not a url", listed), false);
  assert.equal(originListed("https://console.example.com", SETTINGS), false);
  const any = { ...SETTINGS, allowedOrigins: [" * "] };
  assert.equal(originListed("https://any.test", any), true);
  assert.equal(originListed("null", any), false);
  assert.equal(originAllowed("https://any.test", undefined, any), true);
  assert.equal(
    originAllowed("https://console.example.com", "other:1", listed),
    true,
  );
  assert.equal(
    originAllowed("http://127.0.0.1:8080", " 127.0.0.1:8080 ", SETTINGS),
    true,
  );
});

Deno.test("the operator's host list is read without regard to case, spaces or a trailing dot; * takes any name", () => {
  const listed = {
    ...SETTINGS,
    allowedHosts: [" Runner.Internal. ", " *.Corp.Example "],
  };
  assert.equal(hostAllowed("runner.internal:80", listed), true);
  assert.equal(hostAllowed("ci.corp.example", listed), true);
  assert.equal(hostAllowed("corp.example", listed), false);
  assert.equal(hostAllowed("other.test", listed), false);
  assert.equal(
    hostAllowed("anything.test", { ...SETTINGS, allowedHosts: [" * "] }),
    true,
  );
  // The listen name is accepted as the Host, however it was written.
  assert.equal(
    hostAllowed("devbox.lan", { ...SETTINGS, listenHost: "DevBox.Lan." }),
    true,
  );
  assert.equal(
    hostAllowed("devbox.lan.evil", { ...SETTINGS, listenHost: "devbox.lan" }),
    false,
  );
});

Deno.test("a Host value's name: no port, no brackets, lower case, no trailing dot", () => {
  for (
    const [host, name] of [
      [" Example.COM.:8080 ", "example.com"],
      ["example.com:", "example.com"],
      ["[::1]:8080", "::1"],
      ["[FE80::1]", "fe80::1"],
      ["[::1", ""],
      ["127.0.0.1", "127.0.0.1"],
    ]
  ) {
    assert.equal(hostName(host), name, host);
  }
});

Deno.test("a Host without a usable name, or with a colon inside the name, is refused, even where the operator allows any name", () => {
  const any = { ...SETTINGS, allowedHosts: ["*"] };
  for (const host of ["", " ", "[::1", ":8080"]) {
    assert.equal(hostAllowed(host, any), false, JSON.stringify(host));
  }
  for (const host of ["local:host", "local:host:8080", "127.0.0.1:x"]) {
    assert.equal(hostAllowed(host, SETTINGS), false, host);
  }
});

Deno.test("a page without an origin of its own (file:, data:) is no allowed origin, not even under *", () => {
  const any = { ...SETTINGS, allowedOrigins: ["*"] };
  for (const origin of ["file:///home/me/page.html", "data:text/html,hi"]) {
    assert.equal(originAllowed(origin, "127.0.0.1:8080", any), false, origin);
    assert.equal(originListed(origin, any), false, origin);
    assert.equal(
      refusal({ host: "127.0.0.1:8080", origin }, any)?.code,
      "http.origin_not_allowed",
      origin,
    );
  }
});
