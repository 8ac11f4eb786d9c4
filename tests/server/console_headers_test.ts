/**
 * The console's security headers, every directive of its CSP (not just the
 * script rule), on the page and on every file it loads, and what they mean in
 * a real browser: a page of another site cannot frame the console (no
 * clickjacking of its buttons). The page tells the operator which run
 * settings callers may send: the command keys only with
 * `--allow-custom-commands`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { withServe } from "../serve_test_helpers.ts";
import {
  CONSOLE_ARGS,
  openPage,
  TOKEN,
  withBrowser,
} from "../console_helpers.ts";

/** The CSP's directives by name. */
function directives(csp: string): Record<string, string> {
  return Object.fromEntries(
    csp.split(";").map((part) => part.trim()).filter(Boolean).map((part) => {
      const [name, ...values] = part.split(/\s+/);
      return [name, values.join(" ")];
    }),
  );
}

Deno.test("console: every CSP directive, with and without images, nosniff, no referrer, not cached", async () => {
  await withServe({ args: CONSOLE_ARGS }, async (serve) => {
    for (
      const [path, images] of [["/", "'self' data:"], [
        "/?images=1",
        "'self' data: https:",
      ]]
    ) {
      const response = await fetch(`${serve.url}${path}`);
      await response.body?.cancel();
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("x-content-type-options"), "nosniff");
      assert.equal(response.headers.get("referrer-policy"), "no-referrer");
      assert.equal(response.headers.get("cache-control"), "no-store");
      const found = directives(
        response.headers.get("content-security-policy")!,
      );
      const nonce = /^'nonce-[0-9a-f]{32}'$/;
      assert.match(found["script-src"], nonce);
      assert.equal(found["style-src"], found["script-src"]);
      delete found["script-src"];
      delete found["style-src"];
      assert.deepEqual(found, {
        "default-src": "'none'",
        "connect-src": "'self'",
        "img-src": images,
        "form-action": "'none'",
        "frame-ancestors": "'none'",
        "base-uri": "'none'",
      }, path);
    }
  });
});

Deno.test("console: a page of another site cannot frame it", async () => {
  await withServe({ args: CONSOLE_ARGS }, async (serve) => {
    // The attacker's page, on another port of 127.0.0.1 (another origin).
    const attacker = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      () =>
        new Response(
          `<!doctype html><iframe id="victim" src="${serve.url}/"></iframe>`,
          { headers: { "content-type": "text/html" } },
        ),
    );
    try {
      await withBrowser(async (browser) => {
        const page = await openPage(browser);
        await page.goto(`http://127.0.0.1:${attacker.addr.port}/`, {
          waitUntil: "load",
        });
        const framed = page.frames().find((frame) =>
          frame !== page.mainFrame()
        );
        assert.ok(framed, "the iframe exists");
        assert.ok(
          !framed.url().startsWith(serve.url),
          `the console did not load in the frame (${framed.url()})`,
        );
        await page.close();
      });
    } finally {
      await attacker.shutdown();
    }
  });
});

Deno.test("console: every file the page loads has its type, a CSP that runs nothing, nosniff, and an hour's cache", async () => {
  await withServe({ args: CONSOLE_ARGS }, async (serve) => {
    const types: Record<string, RegExp> = {
      "/console/marked.js": /^text\/javascript/,
      "/console/purify.js": /^text\/javascript/,
      "/favicon.ico": /^image\//,
    };
    for (const [path, type] of Object.entries(types)) {
      const response = await fetch(`${serve.url}${path}`);
      const body = await response.arrayBuffer();
      assert.equal(response.status, 200, path);
      assert.ok(body.byteLength > 0, path);
      assert.match(response.headers.get("content-type") ?? "", type, path);
      assert.equal(
        response.headers.get("content-security-policy"),
        "default-src 'none'",
        path,
      );
      assert.equal(response.headers.get("x-content-type-options"), "nosniff");
      assert.equal(
        response.headers.get("cache-control"),
        "public, max-age=3600",
        path,
      );
    }
  });
});

/** The run settings the console page says callers may send. */
async function pageCallerKeys(url: string): Promise<string[]> {
  const page = await (await fetch(`${url}/`)).text();
  const attribute = /data-caller-keys="([^"]*)"/.exec(page);
  assert.ok(attribute, "the page names the caller keys");
  return JSON.parse(attribute[1].replaceAll("&#34;", '"'));
}

Deno.test("console: the page names the settings callers may send, the command keys only with --allow-custom-commands", async () => {
  await withServe({ args: CONSOLE_ARGS }, async (serve) => {
    const keys = await pageCallerKeys(serve.url);
    for (const key of ["provider", "workspace", "env-json", "acp-command"]) {
      assert.ok(keys.includes(key), key);
    }
  });
  await withServe({ args: ["--api-token", TOKEN] }, async (serve) => {
    const keys = await pageCallerKeys(serve.url);
    assert.ok(keys.includes("provider"));
    for (
      const key of ["acp-command", "mcp-servers-json", "ssh-identity-file"]
    ) {
      assert.ok(!keys.includes(key), `${key} without --allow-custom-commands`);
    }
  });
});
