/**
 * The console's security headers, every directive of its CSP (not just the
 * script rule), and what they mean in a real browser: a page of another
 * site cannot frame the console (no clickjacking of its buttons).
 *
 * @module
 */

import assert from "node:assert/strict";
import { withServe } from "../serve_test_helpers.ts";
import { CONSOLE_ARGS, withBrowser } from "../console_helpers.ts";

/** The CSP's directives by name. */
function directives(csp: string): Record<string, string> {
  return Object.fromEntries(
    csp.split(";").map((part) => part.trim()).filter(Boolean).map((part) => {
      const [name, ...values] = part.split(/\s+/);
      return [name, values.join(" ")];
    }),
  );
}

Deno.test("console: every CSP directive, with and without images, and nosniff", async () => {
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
        const page = await browser.newPage();
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
