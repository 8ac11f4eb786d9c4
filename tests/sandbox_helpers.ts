/**
 * Helpers for the sandbox tests: the fixture agent's command and config
 * under `sandbox=confined`, a fake `$HOME`, and the host's view of the
 * processes a run started (found by a marker in their environment).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { findOnPath } from "../lib/agent/find_executable.ts";
import { parseRunConfig } from "../lib/config.ts";
import { fixtureArgv, ROOT, tempDir } from "./helpers.ts";

/** Deno's cache directory: the fixture agent reads its modules from it. */
export const DENO_DIR: string = (() => {
  const output = new Deno.Command(Deno.execPath(), {
    args: ["info", "--json"],
    stdout: "piped",
    stderr: "null",
  }).outputSync();
  return JSON.parse(new TextDecoder().decode(output.stdout)).denoDir;
})();

/**
 * The fixture's command for a confined run: the repository is read-only
 * there, so Deno must not try to set up `node_modules` (it is set up).
 */
export function confinedFixtureCommand(...flags: string[]): string {
  return fixtureArgv(flags, ["--node-modules-dir=manual"]).join(" ");
}

/** A run's world: a fake home with a secret in it, and a marker for its processes. */
export interface SandboxWorld {
  /** The runner's (and the agent's) `HOME`. */
  home: string;
  /** A file in `home` the agent must not see. */
  homeSecret: string;
  /** The value of `SANDBOX_TEST_MARK` in every process of the run. */
  marker: string;
  /** The environment the runner gives runs. */
  environment: Record<string, string>;
}

/** A fresh fake home with `secret.txt` in it, and a fresh marker. */
export function sandboxWorld(): SandboxWorld {
  const home = tempDir("sandbox-home-");
  const homeSecret = join(home, "secret.txt");
  Deno.writeTextFileSync(homeSecret, "home secret\n");
  return {
    home,
    homeSecret,
    marker: crypto.randomUUID(),
    // DENO_DIR: a runner started with this HOME still finds its modules.
    environment: {
      HOME: home,
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      DENO_DIR,
    },
  };
}

/**
 * `runner run`/`probe` arguments for run-config `keys` (as
 * {@linkcode sandboxKeys} gives them): the provider, then `--<key> <value>`.
 */
export function keysAsFlags(keys: Record<string, unknown>): string[] {
  const { provider, ...rest } = keys;
  return [
    String(provider),
    ...Object.entries(rest).flatMap(([key, value]) => [
      `--${key}`,
      Array.isArray(value)
        ? value.join(",")
        : typeof value === "object"
        ? JSON.stringify(value)
        : String(value),
    ]),
  ];
}

/**
 * `runner` flags of a confined run whose agent is the fixture: bubblewrap,
 * the repository and Deno's cache readable, `DENO_DIR` (and `env`) set.
 */
export function confinedFlags(env: Record<string, string> = {}): string[] {
  return [
    ...["--sandbox", "confined"],
    ...["--sandbox-read-paths", `${ROOT},${DENO_DIR}`],
    ...["--env-json", JSON.stringify({ DENO_DIR, ...env })],
  ];
}

/** Run-config keys of a fixture run in `world`, confined unless `sandbox` says otherwise. */
export function sandboxKeys(
  world: SandboxWorld,
  flags: string[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    provider: "custom",
    "acp-command": confinedFixtureCommand(...flags),
    workspace: tempDir("sandbox-ws-"),
    sandbox: "confined",
    "sandbox-read-paths": [ROOT, DENO_DIR],
    "env-json": { DENO_DIR, SANDBOX_TEST_MARK: world.marker },
    ...extra,
  };
}

/** {@linkcode sandboxKeys}, parsed. */
export function sandboxConfig(
  world: SandboxWorld,
  flags: string[],
  extra: Record<string, unknown> = {},
) {
  return parseRunConfig(sandboxKeys(world, flags, extra));
}

/** Host pids of the live processes whose environment holds `marker` (bwrap, the agent, its children). */
export function markedProcesses(marker: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const environ = Deno.readTextFileSync(`/proc/${entry.name}/environ`);
      if (!environ.includes(`SANDBOX_TEST_MARK=${marker}`)) continue;
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      if (stat.slice(stat.lastIndexOf(")") + 2)[0] === "Z") continue;
      found.push(Number(entry.name));
    } catch { /* gone meanwhile */ }
  }
  return found;
}

/** The PID namespace of a process (`pid:[…]`). */
export function pidNamespace(pid: number | "self"): string {
  return Deno.readLinkSync(`/proc/${pid}/ns/pid`);
}

/** Waits (bounded) until no process holds `marker`; the pids still alive otherwise. */
export async function markedGone(marker: string): Promise<number[]> {
  const deadline = Date.now() + 15_000;
  let left = markedProcesses(marker);
  while (left.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    left = markedProcesses(marker);
  }
  return left;
}

/** Kills what a failed test left behind (by `marker`). */
export function killMarked(marker: string): void {
  for (const pid of markedProcesses(marker)) {
    try {
      Deno.kill(pid, "SIGKILL");
    } catch { /* gone meanwhile */ }
  }
}

/** Options of {@linkcode assertKilledRunnerLeavesNothing}. */
export interface KilledRunnerOptions {
  /** The marker of the runner's confined processes (`sandboxWorld().marker`). */
  marker: string;
  /** What the runner's stdout shows once its agent is up. */
  until: string;
  /** Checks on the live processes, before the kill. */
  whileAlive: () => void;
}

/**
 * Reads the `runner` child's stdout up to `until`, runs `whileAlive`, kills
 * the runner with SIGKILL and asserts that no process marked `marker`
 * outlives it; whatever happens, the runner and what it left are killed.
 */
export async function assertKilledRunnerLeavesNothing(
  child: Deno.ChildProcess,
  options: KilledRunnerOptions,
): Promise<void> {
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream())
      .getReader();
    let seen = "";
    while (!seen.includes(options.until)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`runner ended early: ${seen}`);
      seen += value;
    }
    options.whileAlive();
    child.kill("SIGKILL");
    await child.status;
    reader.cancel().catch(() => {});
    assert.deepEqual(await markedGone(options.marker), []);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch { /* already gone */ }
    await child.stderr.cancel().catch(() => {});
    killMarked(options.marker);
  }
}

/** The reply lines of the fixture's `--try-*` switches, by their `try-… target` head. */
export function reachLines(text: string): Record<string, string> {
  const lines: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const match = /^(try-[a-z-]+(?: \S+)?): (.*)$/.exec(line);
    if (match) lines[match[1]] = match[2];
  }
  return lines;
}

/**
 * A `PATH` for a runner that must find no bubblewrap, with the programs the
 * fixture agent and its grandchild use (`sh`, `sleep`) and the runner's `ps`:
 * where bwrap is, unconfined agents and terminal commands run in a PID
 * namespace that dies with the runner, so only without it does a kill -9
 * leave a group for the reaper (`docs/teardown.md`).
 */
export function pathWithoutBwrap(): string {
  const path = tempDir("path-without-bwrap-");
  for (const name of ["ps", "sh", "sleep"]) {
    Deno.symlinkSync(findOnPath(name, Deno.env.get("PATH"))!, join(path, name));
  }
  return path;
}
