/**
 * Which of a registry agent's distributions a place runs, and the command
 * for it: a binary for this platform (installed first), else its `npx` or
 * `uvx` package pinned to an exact version; a remote machine runs only
 * packages (or the binary's program when it is on the remote `PATH`).
 *
 * @module
 */

import { RunnerError } from "../../errors.ts";
import type {
  BinaryTarget,
  PackageDistribution,
  RegistryAgent,
  RegistryPlatform,
} from "./catalogue.ts";

/** The registry's name of the platform this process runs on (undefined: none it knows). */
export function currentRegistryPlatform(): RegistryPlatform | undefined {
  const os = Deno.build.os;
  const arch = Deno.build.arch;
  if (!["darwin", "linux", "windows"].includes(os)) return undefined;
  return `${os}-${arch}` as RegistryPlatform;
}

/** What a place runs of a registry agent. */
export type LaunchPlan =
  | {
    kind: "binary";
    /** The platform's target, to install. */
    target: BinaryTarget;
    /** The platform. */
    platform: RegistryPlatform;
  }
  | {
    kind: "npx" | "uvx";
    /** The command. */
    argv: string[];
    /** The environment the registry gives it. */
    env: Record<string, string>;
  }
  | {
    /** A binary-only agent over ssh: its program if the remote `PATH` has it, else a clear refusal. */
    kind: "remote-path";
    /** The program by name, and its arguments. */
    argv: string[];
    /** The environment the registry gives it. */
    env: Record<string, string>;
    /** What to say when the remote `PATH` does not have it. */
    missing: string;
  };

/** Options for {@linkcode planLaunch}. */
export interface PlanLaunchOptions {
  /** `here`: this machine (install a binary); `remote`: over ssh (packages, or a binary's program found on the remote `PATH`). */
  where: "here" | "remote";
  /** With `remote`: its shell; only bash looks a program up on the remote `PATH` first. */
  remoteShell?: "bash" | "powershell";
  /** This machine's platform (default: the current one). */
  platform?: RegistryPlatform;
}

/**
 * The distribution a place runs.
 *
 * @throws {RunnerError} `agent.no_distribution`, naming the platforms that
 * have a binary.
 */
export function planLaunch(
  agent: RegistryAgent,
  options: PlanLaunchOptions,
): LaunchPlan {
  const { distribution } = agent;
  const platform = options.platform ?? currentRegistryPlatform();
  const target = platform ? distribution.binary?.[platform] : undefined;
  if (options.where === "here" && target && platform) {
    return { kind: "binary", target, platform };
  }
  for (const kind of ["npx", "uvx"] as const) {
    const pkg = distribution[kind];
    if (pkg) {
      return {
        kind,
        argv: packageArgv(kind, pkg, agent.version),
        env: pkg.env,
      };
    }
  }
  const platforms = Object.keys(distribution.binary ?? {});
  const unix = Object.entries(distribution.binary ?? {})
    .find(([name]) => !name.startsWith("windows"))?.[1];
  if (
    options.where === "remote" && unix && options.remoteShell !== "powershell"
  ) {
    const program = unix.cmd.split("/").at(-1)!;
    return {
      kind: "remote-path",
      argv: [program, ...unix.args],
      env: unix.env,
      missing:
        `runner: ${agent.id} ${agent.version} ships only as a binary (for ${
          platforms.join(", ")
        }), which a remote-ssh run does not install, and ${program} is not on the remote PATH. Install it there, or run it on a runner daemon on that machine (location=daemon).`,
    };
  }
  if (options.where === "remote" && platforms.length) {
    throw new RunnerError(
      "agent.no_distribution",
      `${agent.id} ${agent.version} ships only as a binary (for ${
        platforms.join(", ")
      }), which a remote-ssh run does not install. Install it on the remote machine and set provider=custom with acp-command, or run it on a runner daemon there (location=daemon).`,
      { detail: { id: agent.id, platforms } },
    );
  }
  throw new RunnerError(
    "agent.no_distribution",
    `${agent.id} ${agent.version} has no distribution for ${
      platform ?? `${Deno.build.os}-${Deno.build.arch}`
    }: ${
      platforms.length
        ? `binaries exist for ${platforms.join(", ")}`
        : "the registry lists none"
    } and it has no npx or uvx package. Run it on one of those platforms (a runner daemon there), or install it yourself and set provider=custom with acp-command.`,
    { detail: { id: agent.id, platforms } },
  );
}

/**
 * The command for an `npx`/`uvx` distribution, pinned: a package without an
 * exact version (none, `latest`, a range) is pinned to the agent's version.
 */
export function packageArgv(
  kind: "npx" | "uvx",
  pkg: PackageDistribution,
  version: string,
): string[] {
  const spec = pinnedPackage(kind, pkg.package, version);
  if (kind === "npx") {
    return pkg.cmd
      ? ["npx", "-y", "--package", spec, pkg.cmd, ...pkg.args]
      : ["npx", "-y", spec, ...pkg.args];
  }
  return pkg.cmd
    ? ["uvx", "--from", spec, pkg.cmd, ...pkg.args]
    : ["uvx", spec, ...pkg.args];
}

const EXACT = /^\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$/;

/** `package` with an exact version: its own, or `version`. */
export function pinnedPackage(
  kind: "npx" | "uvx",
  spec: string,
  version: string,
): string {
  if (kind === "uvx") {
    const [name, pinned] = spec.includes("==")
      ? spec.split("==", 2)
      : splitAt(spec);
    const bare = name.replace(/[<>=!~^].*$/, "");
    return pinned && EXACT.test(pinned)
      ? `${bare}==${pinned}`
      : `${bare}==${version}`;
  }
  const [name, pinned] = splitAt(spec);
  return pinned && EXACT.test(pinned) ? spec : `${name}@${version}`;
}

/** `@scope/name@1.2.3` → [`@scope/name`, `1.2.3`]; no version → [spec]. */
function splitAt(spec: string): [string, string?] {
  const at = spec.lastIndexOf("@");
  return at > 0 ? [spec.slice(0, at), spec.slice(at + 1)] : [spec];
}
