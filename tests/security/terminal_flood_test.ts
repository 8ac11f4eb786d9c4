/**
 * An agent that floods the event store through client terminals: one
 * terminal's output is capped by `terminal-output-bytes`, so it runs many
 * commands one after another, each printing up to that cap. The run's
 * `terminal.output` events together stay within four times the cap; the
 * event that reaches it, and the first of every later terminal, says
 * `stopped` and `run_limit`, and nothing else follows.
 */

import assert from "node:assert/strict";
import { parseRunConfig } from "../../lib/config.ts";
import { RUN_OUTPUT_FACTOR } from "../../lib/run/terminals.ts";
import { harness, runCompleted } from "../engine_helpers.ts";
import { agentCommand, tempDir } from "../helpers.ts";

Deno.test("a run's terminals together send at most four times terminal-output-bytes as events; the event that crosses it and each later terminal's one event say run_limit", async () => {
  const cap = 1000;
  const each = 700;
  // Five fit (3500 bytes), the sixth crosses the run's limit, the seventh finds none left.
  const commands = 7;
  const flood = {
    command: "sh",
    args: ["-c", `head -c ${each} /dev/zero | tr '\\0' a`],
    release: true,
  };
  const h = harness();
  try {
    const config = parseRunConfig({
      provider: "custom",
      "acp-command": agentCommand(
        Array.from(
          { length: commands },
          () => ["--terminal", JSON.stringify(flood)],
        ).flat(),
      ),
      workspace: tempDir(),
      "client-terminals": true,
      "terminal-output-bytes": cap,
      "langbot-assets-enabled": false,
    });
    const log = await runCompleted(h.manager, {
      input: { text: "go" },
      config,
    });
    const started = log.ofType("terminal.started").map((e) =>
      e.data.terminal_id
    );
    assert.equal(started.length, commands);
    const output = log.ofType("terminal.output").map((e) => e.data);
    const sent = (id: unknown) =>
      output.filter((d) => d.terminal_id === id)
        .map((d) => String(d.output)).join("");
    assert.equal(
      output.map((d) => String(d.output)).join("").length,
      cap * RUN_OUTPUT_FACTOR,
      "the run's limit, in all",
    );
    for (const id of started.slice(0, 5)) {
      assert.equal(sent(id).length, each);
      assert.ok(output.every((d) => d.terminal_id !== id || !d.run_limit));
    }
    const crossing = output.filter((d) => d.terminal_id === started[5]);
    assert.equal(sent(started[5]).length, cap * RUN_OUTPUT_FACTOR - 5 * each);
    assert.deepEqual(
      [crossing.at(-1)!.stopped, crossing.at(-1)!.run_limit],
      [true, true],
    );
    assert.deepEqual(output.filter((d) => d.terminal_id === started[6]), [{
      terminal_id: started[6],
      output: "",
      truncated: true,
      stopped: true,
      run_limit: true,
    }]);
    // The agent still reads each command's whole output.
    const reports = log.messages()[0].split("\n")
      .filter((line) => line.startsWith("terminal "));
    assert.equal(reports.length, commands);
    for (const line of reports) {
      assert.match(line, new RegExp(`"output":"a{${each}}"`));
    }
  } finally {
    await h.close();
  }
});
