/**
 * Who gets a shared agent's output: a real process (`cat` of a FIFO the test
 * writes, so output arrives exactly when and how the test says) wrapped by
 * `shareAgent`. Output that began while no run held the agent never reaches
 * a run; a run sees nothing before its first write when asked; requests and
 * garbage while idle disqualify the agent.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { launchLocal } from "../../lib/locations/local.ts";
import { shareAgent } from "../../lib/run/warm/transport.ts";
import { tempDir } from "../helpers.ts";
import { makeFifo } from "../serve_test_helpers.ts";

const encoder = new TextEncoder();

/** Something that changes; `until` resolves once `test()` holds after a change. */
class Watch {
  #waiters: Array<() => void> = [];
  /** Call after every change. */
  changed(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    waiters.forEach((wake) => wake());
  }
  /** Resolves once `test()` is true. */
  async until(test: () => boolean): Promise<void> {
    while (!test()) {
      await new Promise<void>((resolve) => this.#waiters.push(resolve));
    }
  }
}

/** A process whose stdout is whatever the test writes into its FIFO. */
async function scriptedAgent() {
  const dir = tempDir();
  const fifo = join(dir, "out");
  await makeFifo(fifo);
  const logs: Record<string, unknown>[] = [];
  const logged = new Watch();
  const raw = await launchLocal({
    command: {
      argv: ["sh", "-c", 'exec cat "$0"', fifo],
      commandText: "cat",
      cwd: dir,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
      secrets: [],
    },
  });
  const output = await Deno.open(fifo, { write: true });
  const agent = shareAgent(raw, {
    log(entry) {
      logs.push(entry);
      logged.changed();
    },
  });
  return {
    agent,
    /** Resolves once `count` idle lines were discarded in all. */
    discarded: (count: number) =>
      logged.until(() =>
        logs.filter((entry) =>
          entry.msg === "agent output while idle discarded"
        ).length >= count
      ),
    /** Makes the agent print `text` in one write (one chunk for the runner). */
    async print(text: string) {
      await output.write(encoder.encode(text));
    },
    async close() {
      output.close();
      await agent.teardown();
    },
  };
}

/** Collects a view's stdout as text. */
function collect(stdout: ReadableStream<Uint8Array>) {
  let text = "";
  const watch = new Watch();
  const done = (async () => {
    for await (const chunk of stdout.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      watch.changed();
    }
  })();
  return {
    text: () => text,
    done,
    /** Resolves once the run has received as much as `expected`, and checks it is that. */
    async received(expected: string) {
      await watch.until(() => text.length >= expected.length);
      assert.equal(text, expected);
    },
  };
}

const update = (text: string) =>
  JSON.stringify({
    jsonrpc: "2.0",
    method: "session/update",
    params: {
      sessionId: "s",
      update: { sessionUpdate: "agent_message_chunk", content: { text } },
    },
  });

Deno.test("a line that began while the agent was idle never reaches the next run; a run's unfinished line never reaches the next", async () => {
  const scripted = await scriptedAgent();
  try {
    const cut = update("cut short");
    const half = update("half done");
    const first = scripted.agent.lend();
    const firstOut = collect(first.stdout);
    const mine = `${update("mine")}\n${cut.slice(0, 20)}`;
    await scripted.print(mine);
    await firstOut.received(mine);
    scripted.agent.detach();
    await firstOut.done;
    // The rest of run 1's line, then a whole idle line and half of another.
    await scripted.print(
      `${cut.slice(20)}\n${update("idle")}\n${half.slice(0, 20)}`,
    );
    await scripted.discarded(1);

    const second = scripted.agent.lend();
    const secondOut = collect(second.stdout);
    await scripted.print(`${half.slice(20)}\n${update("theirs")}\n`);
    await scripted.discarded(2);
    await secondOut.received(`${update("theirs")}\n`);
    scripted.agent.detach();
    await secondOut.done;
    assert.equal(secondOut.text(), `${update("theirs")}\n`);
    assert.equal(scripted.agent.unusable, undefined);
  } finally {
    await scripted.close();
  }
});

Deno.test("the rest of a line a run let go of mid-way never reaches the run that holds the agent next", async () => {
  const scripted = await scriptedAgent();
  try {
    const cut = update("cut short");
    const first = scripted.agent.lend();
    const firstOut = collect(first.stdout);
    await scripted.print(cut.slice(0, 20));
    await firstOut.received(cut.slice(0, 20));
    scripted.agent.detach();
    await firstOut.done;
    const second = scripted.agent.lend();
    const secondOut = collect(second.stdout);
    await scripted.print(`${cut.slice(20)}\n${update("theirs")}\n`);
    await secondOut.received(`${update("theirs")}\n`);
    scripted.agent.detach();
    await secondOut.done;
    assert.equal(secondOut.text(), `${update("theirs")}\n`);
  } finally {
    await scripted.close();
  }
});

Deno.test("a warm run sees nothing the agent printed before the run wrote its prompt", async () => {
  const scripted = await scriptedAgent();
  try {
    const view = scripted.agent.lend({ quietUntilFirstWrite: true });
    const out = collect(view.stdout);
    await scripted.print(`${update("stale")}\n`);
    // Whichever comes first: the stale line dropped, or (wrongly) delivered.
    await Promise.race([
      scripted.discarded(1),
      out.received(`${update("stale")}\n`).catch(() => {}),
    ]);
    assert.equal(out.text(), "", "the run saw output from before its prompt");
    const writer = view.stdin.getWriter();
    await writer.write(encoder.encode('{"jsonrpc":"2.0","id":0}\n'));
    await scripted.print(`${update("answer")}\n`);
    await out.received(`${update("answer")}\n`);
    scripted.agent.detach();
    await out.done;
  } finally {
    await scripted.close();
  }
});

Deno.test("an agent that asks something while idle, or prints garbage after speaking ACP, is not reusable", async (t) => {
  await t.step("a request while idle", async () => {
    const scripted = await scriptedAgent();
    try {
      await scripted.print(
        '{"jsonrpc":"2.0","id":7,"method":"session/request_permission"}\n',
      );
      await scripted.agent.spoiled;
      assert.match(scripted.agent.unusable!, /request while idle/);
    } finally {
      await scripted.close();
    }
  });
  await t.step("a banner first is fine, garbage after ACP is not", async () => {
    const scripted = await scriptedAgent();
    try {
      const view = scripted.agent.lend();
      const out = collect(view.stdout);
      const spoken = `Welcome banner\n${update("ok")}\n`;
      await scripted.print(spoken);
      await out.received(spoken);
      assert.equal(scripted.agent.unusable, undefined);
      await scripted.print("fixture: thinking\n");
      await scripted.agent.spoiled;
      assert.match(scripted.agent.unusable!, /non-protocol output/);
      scripted.agent.detach();
      await out.done;
    } finally {
      await scripted.close();
    }
  });
});
