/**
 * A confined agent's network (`sandbox-network`, `docs/sandbox.md`): with
 * `full` the agent gets a network namespace of its own whose only way out is
 * `pasta` (Debian's `passt`): the internet through user-mode NAT, the host's
 * loopback never (no gateway mapping, no port forwarded but the run's own
 * assets endpoint), nor the host's own other addresses (made unreachable
 * inside). `none` is bubblewrap's empty namespace; `host` shares the host's
 * namespace.
 *
 * The agent's argv becomes `unshare --user --keep-caps --net -- sh -c <wait>
 * <fifo> … setpriv … bwrap …`: the namespaces exist before bubblewrap
 * starts, and the shell waits on a FIFO until the runner has attached pasta
 * to them (by the process id, which stays the agent's: `unshare`, `sh` and
 * `setpriv` exec), blocks the host's addresses and drops its capabilities, so
 * the agent never runs before its network is there, and never with the
 * host's.
 *
 * @module
 */

import { join } from "node:path";
import { RunnerError } from "../errors.ts";
import { findOnPath } from "./find_executable.ts";
import type { ReaperRegistry } from "./reaper.ts";
import { signalGroup } from "./process_group.ts";

/**
 * `sandbox-network`, narrowest first: `none` (no network), `full` (the
 * internet, not the host's loopback), `host` (the host's network namespace).
 */
export type SandboxNetwork = "none" | "full" | "host";

/** The network modes from narrowest to widest (a caller may only narrow). */
export const SANDBOX_NETWORKS: readonly SandboxNetwork[] = [
  "none",
  "full",
  "host",
];

/** Whether `wanted` reaches more than `limit` (the operator's floor). */
export function widerNetwork(
  wanted: SandboxNetwork,
  limit: SandboxNetwork,
): boolean {
  return SANDBOX_NETWORKS.indexOf(wanted) > SANDBOX_NETWORKS.indexOf(limit);
}

/**
 * The host-loopback ports among `urls` (`http://127.0.0.1:…`, `localhost`,
 * `[::1]`): what a private network forwards for the run's own endpoints.
 */
export function loopbackPorts(urls: readonly string[]): number[] {
  return urls.flatMap((text) => {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return [];
    }
    const host = url.hostname;
    const loopback = host === "localhost" || host === "[::1]" ||
      /^127\.\d+\.\d+\.\d+$/.test(host);
    if (!loopback) return [];
    return [Number(url.port || (url.protocol === "https:" ? 443 : 80))];
  });
}

/** The address inside the namespace that pasta answers DNS on (`--dns-forward`). */
export const SANDBOX_DNS_ADDRESS = "169.254.1.1";

/** The file descriptor bubblewrap reads the sandbox's `resolv.conf` from. */
const RESOLV_FD = 7;

/**
 * bubblewrap arguments a `full` network adds after the system directories:
 * its own `/etc/resolv.conf` (pasta's DNS forwarder), read from a descriptor
 * the waiting shell opens.
 */
export function networkBwrapArgs(network: SandboxNetwork): string[] {
  if (network !== "full") return [];
  return ["--ro-bind-data", String(RESOLV_FD), "/etc/resolv.conf"];
}

/** The host programs a `full` network needs. */
interface NetworkTools {
  unshare: string;
  pasta: string;
  sh: string;
  /** iproute2's `ip`: lists the host's addresses, blocks them inside. */
  ip: string;
  /** Drops the capabilities the shell kept for `ip` before bubblewrap starts. */
  setpriv: string;
  /** coreutils' `mkfifo`: the FIFOs the shell waits on. */
  mkfifo: string;
}

/** Whether this machine can give a confined agent a `full` network, and why not. */
export interface NetworkAvailability {
  /** pasta and unshare are installed. */
  available: boolean;
  /** Why not, as an instruction to the operator. */
  reason?: string;
}

/** Whether `full` can be made here (pasta and unshare on the runner's `PATH`). */
export function sandboxNetworkAvailability(
  pathValue = Deno.env.get("PATH"),
): NetworkAvailability {
  const tools = findTools(pathValue);
  if (tools) return { available: true };
  return {
    available: false,
    reason:
      "sandbox-network=full needs pasta (apt-get install passt, dnf install passt), unshare and setpriv (util-linux) and ip (iproute2) on the runner's PATH or in /usr/sbin, /sbin, to give the agent the internet without the host's loopback or the host's own addresses. Install them, or set sandbox-network=none (no network) or, knowing the risk, host (docs/sandbox.md).",
  };
}

/** Where system tools live when the runner's `PATH` (a user's) leaves them out. */
const SYSTEM_BIN = "/usr/sbin:/sbin:/usr/bin:/bin";

function findTools(pathValue?: string): NetworkTools | undefined {
  const find = (name: string) =>
    findOnPath(name, pathValue) ?? findOnPath(name, SYSTEM_BIN);
  const pasta = findOnPath("pasta", pathValue);
  const unshare = findOnPath("unshare", pathValue);
  const sh = findOnPath("sh", pathValue) ?? "/bin/sh";
  const ip = find("ip");
  const setpriv = find("setpriv");
  const mkfifo = find("mkfifo");
  if (!pasta || !unshare || !ip || !setpriv || !mkfifo) return undefined;
  return { pasta, unshare, sh, ip, setpriv, mkfifo };
}

/** Throws `sandbox.unavailable` unless a `full` network can be made here. */
function requireTools(): NetworkTools {
  const tools = findTools(Deno.env.get("PATH"));
  if (tools) return tools;
  throw new RunnerError(
    "sandbox.unavailable",
    sandboxNetworkAvailability().reason!,
  );
}

/** Exit code of the waiting shell when it could not block the host's addresses. */
const UNBLOCKED = 124;

/**
 * What `sh` runs before bubblewrap: wait for the network; make each of the
 * host's own addresses unreachable inside (with the capabilities `unshare
 * --keep-caps` left it in its own namespaces); then, without those
 * capabilities, start bubblewrap with the resolver file on fd 7.
 */
const WAIT_SCRIPT = `r=$1; g=$2; ip=$3; setpriv=$4; blocked=$5; shift 5
read -r _ < "$g" || exit 125
set -f
for address in $blocked; do
  case $address in *:*) family=-6 ;; *) family=-4 ;; esac
  "$ip" "$family" rule add to "$address" prohibit || exit ${UNBLOCKED}
done
exec "$setpriv" --inh-caps=-all --ambient-caps=-all -- "$@" ${RESOLV_FD}<<EOF
$r
EOF`;

/** A confined agent's network, made before its process starts and opened after. */
export interface PendingNetwork {
  /** The argv to start instead of the bubblewrap argv. */
  argv: string[];
  /**
   * Attaches pasta to the namespaces of the started process `pid` (the
   * agent's process group), forwarding only `ports` of the host's loopback,
   * then lets the agent start. Once only; rejects with `sandbox.unavailable`
   * (the agent then never starts).
   */
  open(ports: readonly number[]): Promise<void>;
  /** Stops pasta and removes the FIFOs; waits until pasta is gone. */
  close(): Promise<void>;
}

/** Options of {@linkcode prepareSandboxNetwork}. */
export interface PrepareNetworkOptions {
  /** The bubblewrap argv (`sandboxArgv`). */
  argv: readonly string[];
  /** Records pasta's process group for the reaper. */
  registry?: ReaperRegistry;
}

/**
 * Prepares a `full` network for a bubblewrap argv: the FIFOs, and the argv
 * that makes the namespaces and waits. Call `attach` with the started process.
 */
export function prepareSandboxNetwork(
  options: PrepareNetworkOptions,
): PendingNetwork & { attach(pid: number, exited: Promise<unknown>): void } {
  const tools = requireTools();
  const blocked = hostAddresses(tools.ip);
  const dir = Deno.makeTempDirSync({ prefix: "runner-net-" });
  const go = join(dir, "go");
  const ready = join(dir, "ready");
  try {
    makeFifos(tools.mkfifo, [go, ready]);
  } catch (error) {
    Deno.removeSync(dir, { recursive: true });
    throw error;
  }
  const argv = waitingArgv(tools, go, options.argv, blocked);
  let target: { pid: number; exited: Promise<unknown> } | undefined;
  let opening: Promise<void> | undefined;
  let pasta: { pid: number; status: Promise<Deno.CommandStatus> } | undefined;
  let registration: { release(): void } | undefined;
  let closing: Promise<void> | undefined;
  const closeAsked = Promise.withResolvers<void>();
  const open = (ports: readonly number[]) => {
    opening ??= (async () => {
      if (!target) throw new Error("the sandbox's process is not started");
      const { pid, exited } = target;
      // Opens once the shell waits inside the new namespaces.
      const gate = await openFifo(
        go,
        "write",
        Promise.race([exited, closeAsked.promise]),
      );
      try {
        // The FIFOs' directory is the runner's own: its owner says who runs.
        const root = Deno.statSync(dir).uid === 0;
        const started = startPasta({ tools, pid, ports, ready, root });
        pasta = started;
        try {
          registration = options.registry?.register(started.pid);
        } catch { /* pasta still ends with the run and with the runner */ }
        await waitReady(ready, started);
        await gate.write(new TextEncoder().encode("\n"));
      } finally {
        gate.close();
        // Both FIFOs are spent: nothing is left behind, even if the runner
        // is killed later.
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      }
    })();
    return opening;
  };
  return {
    argv,
    attach(pid, exited) {
      target = { pid, exited };
    },
    open,
    close() {
      closing ??= (async () => {
        // An open still waiting for the shell gives up (it then fails).
        closeAsked.resolve();
        await opening?.catch(() => {});
        if (pasta) {
          signalGroup(pasta.pid, "SIGKILL");
          await pasta.status.catch(() => {});
        }
        registration?.release();
        await Deno.remove(dir, { recursive: true }).catch(() => {});
      })();
      return closing;
    },
  };
}

/**
 * `argv` started in new user and network namespaces once `go` says so, with
 * each of `blocked` (`address/prefix`) unreachable inside.
 */
function waitingArgv(
  tools: NetworkTools,
  go: string,
  argv: readonly string[],
  blocked: readonly string[],
): string[] {
  return [
    tools.unshare,
    "--user",
    "--map-current-user",
    "--keep-caps",
    "--net",
    "--",
    tools.sh,
    "-c",
    WAIT_SCRIPT,
    "sh",
    sandboxResolvConf(),
    go,
    tools.ip,
    tools.setpriv,
    blocked.join(" "),
    ...argv,
  ];
}

/**
 * The host's own addresses but loopback, as `address/32` or `address/128`:
 * pasta makes the namespace's connections from the host's sockets, so a
 * connection to one of them (a link-local IPv6 address, a second interface,
 * a container bridge) would reach the host's services bound to it or to
 * every address, from the host itself (no firewall between). The addresses
 * pasta copies into the namespace stay the namespace's own (local routes win).
 */
function hostAddresses(ip: string): string[] {
  const listed = new Deno.Command(ip, {
    args: ["-o", "addr", "show"],
    clearEnv: true,
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  if (!listed.success) {
    throw new RunnerError(
      "sandbox.unavailable",
      `sandbox-network=full: could not list the host's addresses with ${ip} (${
        new TextDecoder().decode(listed.stderr).trim()
      }).`,
    );
  }
  return parseHostAddresses(new TextDecoder().decode(listed.stdout));
}

/** The non-loopback addresses of `ip -o addr show`'s output, as host routes. */
function parseHostAddresses(listing: string): string[] {
  const found = new Set<string>();
  for (const match of listing.matchAll(/\binet(6?) ([0-9a-fA-F.:]+)\//g)) {
    const [, six, address] = match;
    if (six ? address === "::1" : address.startsWith("127.")) continue;
    found.add(`${address}/${six ? 128 : 32}`);
  }
  return [...found];
}

/** The sandbox's resolver file: pasta's DNS forwarder, and the host's search domains. */
function sandboxResolvConf(): string {
  let host = "";
  try {
    host = Deno.readTextFileSync("/etc/resolv.conf");
  } catch { /* no search domains to keep */ }
  const kept = host.split("\n").filter((line) =>
    /^\s*(search|domain|options)\s/.test(line)
  );
  return [`nameserver ${SANDBOX_DNS_ADDRESS}`, ...kept].join("\n");
}

function makeFifos(mkfifo: string, paths: string[]): void {
  const made = new Deno.Command(mkfifo, {
    args: ["-m", "600", ...paths],
    stdout: "null",
    stderr: "piped",
  }).outputSync();
  if (!made.success) {
    throw new RunnerError(
      "sandbox.unavailable",
      `sandbox-network=full: could not make the network's FIFOs (${
        new TextDecoder().decode(made.stderr).trim()
      }); check that TMPDIR is writable.`,
    );
  }
}

/** Starts pasta on `pid`'s namespaces: NAT out, no gateway mapping, only `ports` forwarded to the host. */
function startPasta(
  options: {
    tools: NetworkTools;
    pid: number;
    ports: readonly number[];
    ready: string;
    /** The runner runs as root. */
    root: boolean;
  },
): { pid: number; status: Promise<Deno.CommandStatus> } {
  const { tools, pid, ports, ready, root } = options;
  const forwarded = ports.length ? [...new Set(ports)].join(",") : "none";
  const pastaArgs = [
    // pasta (up to 2023) refuses to attach as root unless it stays root; it
    // still drops its capabilities and sandboxes itself.
    ...(root ? ["--runas", "0"] : []),
    "--config-net",
    "--foreground",
    "--quiet",
    "--no-map-gw",
    "--tcp-ports",
    "none",
    "--udp-ports",
    "none",
    "--tcp-ns",
    forwarded,
    "--udp-ns",
    "none",
    "--dns-forward",
    SANDBOX_DNS_ADDRESS,
    "--pid",
    ready,
    String(pid),
  ];
  // pasta dies with the runner (kill -9 included); the reaper is the
  // backstop.
  const child = new Deno.Command(tools.setpriv, {
    args: ["--pdeathsig", "KILL", "--", tools.pasta, ...pastaArgs],
    // pasta needs nothing of the runner's environment (its secrets least).
    clearEnv: true,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
    detached: true,
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const status = child.status;
  return {
    pid: child.pid,
    status: status.then(async (result) => {
      if (!result.success) pastaFailures.set(child.pid, await stderr);
      return result;
    }),
  };
}

const pastaFailures = new Map<number, string>();

/** Waits until pasta wrote its pid file (its network is configured then), or fails with what it said. */
async function waitReady(
  ready: string,
  pasta: { pid: number; status: Promise<Deno.CommandStatus> },
): Promise<void> {
  const reading = (async () => {
    const file = await openFifo(ready, "read", pasta.status);
    return new TextDecoder().decode(await readAll(file)).trim();
  })();
  const written = await reading.catch(() => "");
  if (/^\d+$/.test(written)) return;
  await pasta.status;
  const said = (pastaFailures.get(pasta.pid) ?? "").split("\n")
    .filter((line) => line && !line.includes("syslog")).join("; ")
    .slice(0, 300);
  pastaFailures.delete(pasta.pid);
  throw new RunnerError(
    "sandbox.unavailable",
    `sandbox-network=full: pasta could not give the agent its network (${
      said || "it exited"
    }). Check that user namespaces are allowed, or set sandbox-network=none (docs/sandbox.md).`,
  );
}

async function readAll(file: Deno.FsFile): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  // The stream closes the file at its end.
  for await (const chunk of file.readable) chunks.push(chunk);
  return new Uint8Array(chunks.flatMap((chunk) => [...chunk]));
}

/**
 * Opens a FIFO, which waits for its other end; when `abandon` settles first,
 * the other end is opened here instead, so nothing waits for good, and this
 * fails.
 */
async function openFifo(
  path: string,
  mode: "read" | "write",
  abandon: Promise<unknown>,
): Promise<Deno.FsFile> {
  const opening = Deno.open(
    path,
    mode === "read" ? { read: true } : { write: true },
  );
  let opened = false;
  opening.then(() => opened = true, () => opened = true);
  const gaveUp = abandon.then(
    () => "gave up" as const,
    () => "gave up" as const,
  );
  const first = await Promise.race([opening, gaveUp]);
  if (first !== "gave up") return first;
  if (!opened) {
    const other = await Deno.open(
      path,
      mode === "read" ? { write: true } : { read: true },
    );
    other.close();
  }
  (await opening).close();
  throw new Error("the other end of the FIFO went away");
}
