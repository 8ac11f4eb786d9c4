/**
 * What `/acp`'s `initialize` says of targets it does not probe: a daemon's
 * agent and a registry agent are reported as not learned, with the reason,
 * and nothing is started for them.
 *
 * @module
 */

import assert from "node:assert/strict";
import { parseRunConfig } from "../../lib/config.ts";
import { createTargetDescriber } from "../../lib/cli/serve/acp_targets.ts";

Deno.test("acp targets: a registry agent is not probed, and initialize says why", async () => {
  const describe = createTargetDescriber();
  const target = await describe(
    parseRunConfig({ provider: "some-registry-agent", workspace: "/tmp" }),
  );
  assert.equal(target.source, "runner");
  assert.match(String(target.note), /^Registry agent some-registry-agent: /);
  assert.equal(target.agentCapabilities, undefined);
});

Deno.test("acp targets: a daemon's agent is not probed, and initialize says why", async () => {
  const describe = createTargetDescriber();
  const target = await describe(
    parseRunConfig({
      provider: "custom",
      "acp-command": "never-started-here",
      location: "daemon",
      "daemon-id": "laptop",
    }),
  );
  assert.equal(target.source, "runner");
  assert.match(String(target.note), /daemon laptop/);
});
