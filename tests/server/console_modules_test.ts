/**
 * The console's own modules (`lib/server/console/`, `console_modules.ts`)
 * as a browser gets them from a real `runner serve`: the page loads the
 * entry module and the libraries' import map under its nonce; every module
 * is served as it is in the repository, without the token, as JavaScript,
 * never cached; nothing else is served under their path.
 *
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { apiFetch, withServe } from "../serve_test_helpers.ts";

const MODULES = fileURLToPath(
  new URL("../../lib/server/console/", import.meta.url),
);

/** The file names of the console's modules in the repository. */
async function moduleFiles(): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(MODULES)) {
    if (entry.isFile && entry.name.endsWith(".js")) names.push(entry.name);
  }
  return names.sort();
}

Deno.test("console: the page loads main.js and the libraries' import map under its nonce", async () => {
  await withServe({}, async (serve) => {
    const page = await fetch(`${serve.url}/`);
    assert.equal(page.status, 200);
    const csp = page.headers.get("content-security-policy")!;
    const nonce = csp.match(/script-src 'nonce-([0-9a-f]+)'/)?.[1];
    assert.ok(nonce, csp);
    const html = await page.text();
    assert.ok(
      html.includes(
        `<script type="module" nonce="${nonce}" src="/console/app/main.js"></script>`,
      ),
      "the page loads main.js with its nonce",
    );
    const map = html.match(
      new RegExp(`<script type="importmap" nonce="${nonce}">([^<]*)</script>`),
    );
    assert.ok(map, "the page has its import map with its nonce");
    assert.deepEqual(JSON.parse(map[1]), {
      imports: {
        marked: "/console/marked.js",
        dompurify: "/console/purify.js",
      },
    });
    // Only these two scripts: no other inline code.
    assert.equal(html.match(/<script\b/g)?.length, 2);
  });
});

Deno.test("console: every module is served as it is, to anyone, never cached; no other name is", async () => {
  await withServe({}, async (serve) => {
    const files = await moduleFiles();
    assert.ok(files.includes("main.js"));
    for (const name of files) {
      const response = await fetch(`${serve.url}/console/app/${name}`);
      assert.equal(response.status, 200, name);
      assert.equal(
        response.headers.get("content-type"),
        "text/javascript; charset=utf-8",
      );
      assert.equal(response.headers.get("cache-control"), "no-cache");
      assert.equal(
        response.headers.get("content-security-policy"),
        "default-src 'none'",
      );
      assert.equal(response.headers.get("x-content-type-options"), "nosniff");
      assert.equal(
        await response.text(),
        await Deno.readTextFile(MODULES + name),
        `${name} is served as it is`,
      );
    }
    const stranger = await fetch(`${serve.url}/console/app/nope.js`);
    assert.equal(stranger.status, 401, "an unknown name is no open route");
    await stranger.body?.cancel();
    for (
      const name of ["nope.js", "constructor", "__proto__", "toString", "main"]
    ) {
      const response = await apiFetch(`${serve.url}/console/app/${name}`);
      assert.equal(response.status, 404, name);
      await response.body?.cancel();
    }
  });
});
