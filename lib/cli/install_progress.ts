/**
 * What a command shows while a registry agent downloads: one line on a
 * terminal, rewritten as bytes arrive; elsewhere one line when it starts.
 * Notes about the registry (a cached copy and its age) go to stderr too.
 *
 * @module
 */

import type { RegistryContext } from "../providers.ts";

const encoder = new TextEncoder();

/** The progress and note callbacks of a command that may install an agent. */
export function installReporting(
  write: (text: string) => void = (text) =>
    Deno.stderr.writeSync(encoder.encode(text)),
  terminal = Deno.stderr.isTerminal(),
): Pick<RegistryContext, "onProgress" | "onNote"> & { finish(): void } {
  let current: string | undefined;
  let lastShown = 0;
  return {
    onProgress(progress) {
      const name = `${progress.id} ${progress.version}`;
      if (!terminal) {
        if (current !== name) write(`downloading ${name}…\n`);
        current = name;
        return;
      }
      current = name;
      const done = progress.total !== undefined &&
        progress.received >= progress.total;
      const now = Date.now();
      if (!done && now - lastShown < 100) return;
      lastShown = now;
      const total = progress.total === undefined
        ? ""
        : ` of ${mebibytes(progress.total)}`;
      write(
        `\r\x1b[2Kdownloading ${name}: ${mebibytes(progress.received)}${total}`,
      );
    },
    onNote(note) {
      write(`${terminal && current ? "\n" : ""}note: ${note}\n`);
    },
    finish() {
      if (terminal && current) write("\n");
      current = undefined;
    },
  };
}

function mebibytes(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
