/**
 * An unconfined command (`sandbox=off`) in a PID namespace of its own
 * (`docs/teardown.md`): wherever bubblewrap can make one, the agent and each
 * client terminal command run as `bwrap --dev-bind / / --unshare-pid
 * --die-with-parent -- …`. They see the machine as before (the host's
 * root, `/proc` and network, the runner's user and, for root, its
 * capabilities), but when the command's first process ends, or the runner
 * dies, the kernel kills everything it started, even a process that left
 * its process group (`setsid`, a double fork).
 *
 * @module
 */

import { findOnPath } from "./find_executable.ts";

let checked: { bwrap?: string } | undefined;

/**
 * `argv` to run in a PID namespace of its own, working in `cwd`; `argv`
 * unchanged where bubblewrap is absent or cannot make the namespace here
 * (checked once per process).
 */
export function inPidNamespace(argv: readonly string[], cwd: string): string[] {
  const bwrap = pidNamespaceLauncher();
  if (!bwrap) return [...argv];
  return [bwrap, ...pidNamespaceArgs(cwd), "--", ...argv];
}

/** The `bwrap` that can run a command in a PID namespace here, if any (checked once per process). */
export function pidNamespaceLauncher(): string | undefined {
  checked ??= { bwrap: tryLauncher() };
  return checked.bwrap;
}

function pidNamespaceArgs(cwd: string): string[] {
  return [
    "--dev-bind",
    "/",
    "/",
    "--unshare-pid",
    "--die-with-parent",
    "--chdir",
    cwd,
  ];
}

function tryLauncher(): string | undefined {
  if (Deno.build.os !== "linux") return undefined;
  const bwrap = findOnPath("bwrap", Deno.env.get("PATH"));
  if (!bwrap) return undefined;
  try {
    const trial = new Deno.Command(bwrap, {
      args: [...pidNamespaceArgs("/"), "--", "true"],
      stdin: "null",
      stdout: "null",
      stderr: "null",
      clearEnv: true,
    }).outputSync();
    return trial.success ? bwrap : undefined;
  } catch {
    return undefined;
  }
}
