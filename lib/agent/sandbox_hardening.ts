/**
 * What a confined agent has to escape with (`docs/sandbox.md`, "Nothing to
 * escape with"): bubblewrap's arguments that drop every capability, put the
 * agent in a user namespace of its own where the kernel allows one, and keep
 * it from making another (a nested user namespace would give it
 * capabilities again). The seccomp filter is added when the agent starts
 * (`seccomp_launch.ts`).
 *
 * @module
 */

const userNamespaceChecked = new Map<string, boolean>();

/**
 * The hardening arguments of every confined `bwrap` command: `--cap-drop
 * ALL` always (a runner started as root otherwise leaves the agent root's
 * capabilities); `--unshare-user --disable-userns` where `bwrap` can make a
 * user namespace here (checked once per process).
 */
export function hardeningArgs(bwrap: string): string[] {
  return [
    "--cap-drop",
    "ALL",
    ...(userNamespaceWorks(bwrap)
      ? ["--unshare-user", "--disable-userns"]
      : []),
  ];
}

/** Whether `bwrap` can start a process in a user namespace that cannot nest another; checked once per process. */
export function userNamespaceWorks(bwrap: string): boolean {
  let works = userNamespaceChecked.get(bwrap);
  if (works === undefined) {
    works = tryUserNamespace(bwrap);
    userNamespaceChecked.set(bwrap, works);
  }
  return works;
}

function tryUserNamespace(bwrap: string): boolean {
  try {
    return trueInBwrap(bwrap, ["--unshare-user", "--disable-userns"]).success;
  } catch {
    return false;
  }
}

/**
 * Runs `true` under `bwrap` in a new PID namespace plus `namespaceArgs`, with
 * `/` read-only and an empty environment; its output (stderr piped). Throws
 * when `bwrap` cannot be started at all.
 */
export function trueInBwrap(
  bwrap: string,
  namespaceArgs: string[] = [],
): Deno.CommandOutput {
  return new Deno.Command(bwrap, {
    args: [
      ...namespaceArgs,
      "--unshare-pid",
      "--die-with-parent",
      "--ro-bind",
      "/",
      "/",
      "--",
      "true",
    ],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    clearEnv: true,
  }).outputSync();
}
