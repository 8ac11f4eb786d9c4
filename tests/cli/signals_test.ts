/**
 * `runner run`'s signals, for the window before the run's own handler is
 * installed: a signal that arrives after the command started listening but
 * before the run exists still cancels the run the moment its handler is
 * given, and later signals cancel it too; each signal's exit code is kept.
 *
 * @module
 */

import assert from "node:assert/strict";

/**
 * For each signal, in a fresh Deno (the test runner keeps SIGINT for
 * itself): what `received` and the number of cancels are after the signal
 * came before `onSignal`, and after one more signal.
 */
const CHILD = `
const { listenForRunSignals } = await import(Deno.args[1]);
function raise(signal) {
  const { promise, resolve } = Promise.withResolvers();
  const seen = () => { Deno.removeSignalListener(signal, seen); resolve(); };
  Deno.addSignalListener(signal, seen);
  Deno.kill(Deno.pid, signal);
  return promise;
}
const mode = Deno.args[0];
if (mode === "stopped") {
  listenForRunSignals().stop();
  Deno.kill(Deno.pid, "SIGTERM");
  // Only reached when a listener still catches SIGTERM.
  await new Promise((resolve) => setTimeout(resolve, 10_000));
  console.log("survived");
  Deno.exit(0);
}
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  const signals = listenForRunSignals();
  let cancels = 0;
  const before = signals.received ?? null;
  if (mode === "early") await raise(signal);
  signals.onSignal(() => cancels++);
  const atHandler = cancels;
  await raise(mode === "early" ? "SIGTERM" : signal);
  console.log(JSON.stringify({ signal, before, atHandler, cancels, received: signals.received }));
  signals.stop();
}
`;

function childOutput(mode: "early" | "late" | "stopped") {
  return new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      "--ext=js",
      CHILD,
      mode,
      new URL("../../lib/cli/run/signals.ts", import.meta.url).href,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
}

async function childRun(mode: "early" | "late") {
  const output = await childOutput(mode);
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 0, stderr);
  return new TextDecoder().decode(output.stdout).trim().split("\n")
    .map((line) => JSON.parse(line));
}

const CODES = { SIGINT: 130, SIGTERM: 143, SIGHUP: 129 };

const WINDOWS = [
  {
    name:
      "a signal before the run's handler is given cancels the run as soon as it is; the first signal's exit code is kept",
    mode: "early",
    // In the window it cancels the run; a later one again.
    expected: { atHandler: 1, cancels: 2 },
  },
  {
    name:
      "without an early signal, giving the run's handler cancels nothing; a signal then cancels once",
    mode: "late",
    expected: { atHandler: 0, cancels: 1 },
  },
] as const;

for (const { name, mode, expected } of WINDOWS) {
  Deno.test(name, async () => {
    for (const seen of await childRun(mode)) {
      const code = CODES[seen.signal as keyof typeof CODES];
      assert.deepEqual(seen, {
        signal: seen.signal,
        before: null,
        ...expected,
        received: code,
      }, `${seen.signal} (${mode})`);
    }
  });
}

Deno.test("once stopped, a signal has its default action again (the runner ends)", async () => {
  const output = await childOutput("stopped");
  assert.equal(output.signal, "SIGTERM");
  assert.equal(new TextDecoder().decode(output.stdout), "");
});
