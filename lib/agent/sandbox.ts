/**
 * The agent sandbox (`docs/sandbox.md`): with `sandbox=confined` the agent
 * runs under bubblewrap (`bwrap`), seeing its workspace, its own state
 * directories, the configured extra paths and the system directories, in a
 * PID namespace of its own that dies with the run.
 *
 * @module
 */

import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { RunnerError } from "../errors.ts";
import { findOnPath } from "./find_executable.ts";
import { hardeningArgs, trueInBwrap } from "./sandbox_hardening.ts";
import { networkBwrapArgs, type SandboxNetwork } from "./sandbox_network.ts";

export type { SandboxNetwork } from "./sandbox_network.ts";

/** `sandbox`: `off` runs the agent as before; `confined` runs it under bubblewrap. */
export type SandboxMode = "off" | "confined";

/** How one agent is confined (absent on an unconfined launch). */
export interface SandboxPlan {
  /** Always `confined`. */
  mode: "confined";
  /** The network mode. */
  network: SandboxNetwork;
  /** Directories (and files) the agent reads, absolute. */
  readPaths: string[];
  /** Directories (and files) the agent reads and writes, absolute (workspace last). */
  writePaths: string[];
  /** The agent's `HOME`, empty inside but for the state directories. */
  home?: string;
}

/** Whether this machine can confine agents, and why not. */
export interface SandboxAvailability {
  /** bubblewrap is installed and can create the namespaces. */
  available: boolean;
  /** The `bwrap` program used. */
  bwrap?: string;
  /** Why it cannot, as an instruction to the operator. */
  reason?: string;
}

/** System directories mounted read-only in every sandbox (those that exist). */
export const SYSTEM_DIRS: readonly string[] = [
  "/usr",
  "/bin",
  "/sbin",
  "/lib",
  "/lib32",
  "/lib64",
  "/libx32",
  "/etc",
  "/opt",
  "/nix/store",
  "/run/systemd/resolve",
];

/** Files under the system directories that stay hidden even read-only. */
const MASKED_FILES = ["/etc/shadow", "/etc/gshadow", "/etc/sudoers"];

let confirmed: SandboxAvailability | undefined;

/**
 * Checks (once per process, while it keeps succeeding) that bubblewrap is
 * installed and can make the sandbox's namespaces, by starting `true` in one.
 */
export function sandboxAvailability(
  pathValue = Deno.env.get("PATH"),
): SandboxAvailability {
  if (confirmed) return confirmed;
  if (Deno.build.os !== "linux") {
    return {
      available: false,
      reason:
        `sandbox=confined needs bubblewrap, which runs on Linux only; this machine is ${Deno.build.os}. Set sandbox=off, or run the agent on a Linux machine (a runner daemon there).`,
    };
  }
  const bwrap = findOnPath("bwrap", pathValue);
  if (!bwrap) {
    return {
      available: false,
      reason:
        "sandbox=confined needs bubblewrap, which is not on the runner's PATH (apt-get install bubblewrap, dnf install bubblewrap).",
    };
  }
  const trial = tryNamespaces(bwrap);
  if (trial) return { available: false, bwrap, reason: trial };
  confirmed = { available: true, bwrap };
  return confirmed;
}

/** Starts `true` in the sandbox's namespaces; the reason it failed, or undefined. */
function tryNamespaces(bwrap: string): string | undefined {
  try {
    const output = trueInBwrap(bwrap);
    if (output.success) return undefined;
    const said = new TextDecoder().decode(output.stderr).trim().slice(0, 300);
    return `sandbox=confined: bubblewrap (${bwrap}) cannot create namespaces here (${said}). Allow user namespaces (sysctl kernel.unprivileged_userns_clone=1, or the AppArmor rule for bwrap on Ubuntu), or run the agent elsewhere.`;
  } catch (error) {
    return `sandbox=confined: bubblewrap (${bwrap}) could not be started (${
      error instanceof Error ? error.message : error
    }).`;
  }
}

/** Throws `sandbox.unavailable` unless this machine can confine agents; returns `bwrap`. */
export function requireSandbox(): string {
  const availability = sandboxAvailability();
  if (availability.available && availability.bwrap) return availability.bwrap;
  throw new RunnerError(
    "sandbox.unavailable",
    availability.reason ?? "sandbox=confined is not available here.",
  );
}

/** Options for {@linkcode planSandbox}. */
export interface PlanSandboxOptions {
  /** The network mode. */
  network: SandboxNetwork;
  /** The agent's working directory. */
  workspace: string;
  /** The agent's environment (`HOME`, `PATH`, `npm_config_cache`). */
  env: Record<string, string>;
  /** The preset's state directories (`~/…` or absolute); none for a custom command. */
  stateDirs?: readonly string[];
  /** `sandbox-read-paths`. */
  readPaths?: readonly string[];
  /** `sandbox-write-paths`. */
  writePaths?: readonly string[];
  /** The agent's program (`argv[0]`): where a symbolic link on `PATH` leads is made readable. */
  program?: string;
}

/**
 * What a confined agent sees: the `PATH` directories and `sandbox-read-paths`
 * read-only; its state directories (created), an npx agent's npm cache,
 * `sandbox-write-paths` and the workspace read-write.
 */
export function planSandbox(options: PlanSandboxOptions): SandboxPlan {
  const home = options.env.HOME || undefined;
  if (
    resolve(options.workspace) === "/" || hidesHome(options.workspace, home)
  ) {
    throw new RunnerError(
      "config.invalid",
      `workspace: ${options.workspace} would show the whole of $HOME (or the machine) to a confined agent; give the run a directory of its own (sandbox=confined)`,
      { detail: { key: "workspace" } },
    );
  }
  const expand = (path: string) => expandHome(path, home);
  const pathDirs = (options.env.PATH ?? "").split(":")
    .filter((dir) => isAbsolute(dir) && !hidesHome(dir, home));
  const own = [...(options.stateDirs ?? [])];
  const program = options.program ?? "";
  if (startsWithNpx([program])) {
    own.push(options.env.npm_config_cache ?? "~/.npm");
  }
  const stateDirs = own.flatMap((path) => {
    const full = expand(path);
    return full === undefined ? [] : [full];
  });
  for (const dir of stateDirs) {
    // A `.json` entry is a file (`~/.claude.json`): bound only if it exists.
    if (dir.endsWith(".json")) continue;
    try {
      Deno.mkdirSync(dir, { recursive: true });
    } catch { /* not ours to make: bound only if it exists */ }
  }
  return {
    mode: "confined",
    network: options.network,
    readPaths: [
      ...pathDirs,
      ...linkedPackage(program, options.env.PATH),
      ...compiledRunner(),
      ...configured(options.readPaths, expand),
    ],
    writePaths: [
      ...stateDirs,
      ...configured(options.writePaths, expand),
      options.workspace,
    ],
    home,
  };
}

/**
 * Where the agent's program leads when it is a symbolic link (npm's global
 * installs, e.g. `~/.nvm/…/bin/npx` → `…/lib/node_modules/npm/bin/npx-cli.js`):
 * the nearest directory above the target holding a `package.json` (else the
 * target's own directory), so the program can load its files.
 */
function linkedPackage(program: string, pathValue?: string): string[] {
  const found = program ? findOnPath(program, pathValue) : undefined;
  if (!found) return [];
  let target: string;
  try {
    target = Deno.realPathSync(found);
  } catch {
    return [];
  }
  if (target === resolve(found)) return [];
  for (let dir = dirname(target); dir !== dirname(dir); dir = dirname(dir)) {
    try {
      Deno.statSync(join(dir, "package.json"));
      return [dir];
    } catch { /* keep climbing */ }
  }
  return [dirname(target)];
}

/**
 * The compiled runner itself, read-only: agents without MCP over HTTP start
 * it as `runner mcp-stdio` to reach the run's assets. (Run from source, the
 * runner is `deno run main.ts`, which a confined agent cannot start.)
 */
function compiledRunner(): string[] {
  const exe = Deno.execPath();
  return /(^|\/)deno$/.test(exe) ? [] : [exe];
}

function configured(
  paths: readonly string[] | undefined,
  expand: (path: string) => string | undefined,
): string[] {
  return (paths ?? []).map((path) => {
    const full = expand(path);
    if (full === undefined || !isAbsolute(full)) {
      throw new RunnerError(
        "config.invalid",
        `sandbox paths must be absolute or start with ~/ (got "${path}")`,
      );
    }
    return resolve(full);
  });
}

function expandHome(path: string, home?: string): string | undefined {
  if (path !== "~" && !path.startsWith("~/")) return path;
  if (!home) return undefined;
  return path === "~" ? home : join(home, path.slice(2));
}

/** A `PATH` entry that is `/`, `HOME` or above it would show the whole home. */
function hidesHome(dir: string, home?: string): boolean {
  const clean = resolve(dir);
  if (clean === "/") return true;
  if (!home) return false;
  const root = resolve(home);
  return root === clean ||
    root.startsWith(clean.endsWith("/") ? clean : `${clean}/`);
}

/** The `bwrap` arguments (before `--` and the agent's argv) for `plan`. */
export function sandboxArgs(plan: SandboxPlan, cwd: string): string[] {
  const args = [
    "--die-with-parent",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
  ];
  if (plan.network === "none") args.push("--unshare-net");
  for (const dir of SYSTEM_DIRS) args.push("--ro-bind-try", dir, dir);
  // Only files that exist: a mount point cannot be made in read-only /etc.
  for (const file of [...MASKED_FILES.filter(exists), ...hostKeys()]) {
    args.push("--ro-bind", "/dev/null", file);
  }
  args.push(...networkBwrapArgs(plan.network));
  args.push("--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp");
  if (plan.home && !SYSTEM_DIRS.some((dir) => within(plan.home!, dir))) {
    args.push("--tmpfs", plan.home);
  }
  for (const path of plan.readPaths) args.push("--ro-bind-try", path, path);
  for (const path of plan.writePaths) args.push("--bind-try", path, path);
  args.push("--chdir", cwd, "--setenv", "TMPDIR", "/tmp");
  return args;
}

/**
 * The full argv that starts `argv` confined by `plan`, without capabilities
 * (`sandbox_hardening.ts`); `spawnAgent` adds the seccomp filter.
 */
export function sandboxArgv(
  bwrap: string,
  plan: SandboxPlan,
  argv: string[],
  cwd: string,
): string[] {
  return [
    bwrap,
    ...hardeningArgs(bwrap),
    ...sandboxArgs(plan, cwd),
    "--",
    ...argv,
  ];
}

/**
 * `argv` (from {@linkcode sandboxArgv}) with `env` set inside the sandbox by
 * bubblewrap's `--setenv`, never in bwrap's own environment (bwrap runs on
 * the host, unconfined: a variable there could make it load code); the
 * plan's own settings (`TMPDIR`) still win.
 */
export function withSandboxEnv(
  argv: readonly string[],
  env: readonly { name: string; value: string }[],
): string[] {
  const [bwrap, ...rest] = argv;
  return [
    bwrap,
    ...env.flatMap((entry) => ["--setenv", entry.name, entry.value]),
    ...rest,
  ];
}

function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`);
}

/** The SSH host keys under `/etc/ssh` (a runner started as root could read them). */
function hostKeys(): string[] {
  try {
    return [...Deno.readDirSync("/etc/ssh")]
      .filter((entry) => /^ssh_host_.*_key$/.test(entry.name))
      .map((entry) => join("/etc/ssh", entry.name));
  } catch {
    return [];
  }
}

/** Whether `argv` starts the agent with npx (its npm cache is then its state). */
export function startsWithNpx(argv: readonly string[]): boolean {
  const name = basename(argv[0] ?? "");
  return name === "npx" || name === "npx.cmd" ||
    (name === "npm" && argv[1] === "exec");
}
