/**
 * The seccomp filter of a confined agent (`docs/sandbox.md`, "Nothing to
 * escape with"): a classic-BPF program, built here, that bubblewrap loads
 * (`--seccomp FD`) before it starts the agent. It answers `EPERM` to the
 * system calls container escapes are made of (mounts, file handles, kernel
 * modules, namespaces, keyrings, BPF, tracing), `ENOSYS` to `clone3` (whose
 * flags it cannot read; the C library then uses `clone`), and `EPERM` to
 * every call of a foreign ABI (i386, x32), which would bypass the numbers
 * below. Everything else is allowed.
 *
 * @module
 */

/** The architectures the filter knows (Deno's `Deno.build.arch`). */
export type SeccompArch = "x86_64" | "aarch64";

/** One refused system call: its name and its number per architecture. */
interface BlockedCall {
  name: string;
  x86_64?: number;
  aarch64?: number;
}

/**
 * Calls refused with `EPERM` outright (numbers from the kernel's
 * `unistd_64.h` and `asm-generic/unistd.h`).
 */
const BLOCKED: readonly BlockedCall[] = [
  // Mounts, old and new API: a remount or `umount` of a mask.
  { name: "mount", x86_64: 165, aarch64: 40 },
  { name: "umount2", x86_64: 166, aarch64: 39 },
  { name: "pivot_root", x86_64: 155, aarch64: 41 },
  { name: "open_tree", x86_64: 428, aarch64: 428 },
  { name: "move_mount", x86_64: 429, aarch64: 429 },
  { name: "fsopen", x86_64: 430, aarch64: 430 },
  { name: "fsconfig", x86_64: 431, aarch64: 431 },
  { name: "fsmount", x86_64: 432, aarch64: 432 },
  { name: "fspick", x86_64: 433, aarch64: 433 },
  { name: "mount_setattr", x86_64: 442, aarch64: 442 },
  { name: "open_tree_attr", x86_64: 467, aarch64: 467 },
  // File handles: opening a host file by inode, past the mount namespace.
  { name: "name_to_handle_at", x86_64: 303, aarch64: 264 },
  { name: "open_by_handle_at", x86_64: 304, aarch64: 265 },
  // The kernel itself.
  { name: "init_module", x86_64: 175, aarch64: 105 },
  { name: "finit_module", x86_64: 313, aarch64: 273 },
  { name: "delete_module", x86_64: 176, aarch64: 106 },
  { name: "kexec_load", x86_64: 246, aarch64: 104 },
  { name: "kexec_file_load", x86_64: 320, aarch64: 294 },
  { name: "bpf", x86_64: 321, aarch64: 280 },
  { name: "perf_event_open", x86_64: 298, aarch64: 241 },
  { name: "userfaultfd", x86_64: 323, aarch64: 282 },
  { name: "lookup_dcookie", x86_64: 212, aarch64: 18 },
  { name: "syslog", x86_64: 103, aarch64: 116 },
  { name: "reboot", x86_64: 169, aarch64: 142 },
  { name: "swapon", x86_64: 167, aarch64: 224 },
  { name: "swapoff", x86_64: 168, aarch64: 225 },
  { name: "acct", x86_64: 163, aarch64: 89 },
  { name: "quotactl", x86_64: 179, aarch64: 60 },
  { name: "quotactl_fd", x86_64: 443, aarch64: 443 },
  { name: "iopl", x86_64: 172 },
  { name: "ioperm", x86_64: 173 },
  { name: "uselib", x86_64: 134 },
  { name: "_sysctl", x86_64: 156 },
  { name: "nfsservctl", x86_64: 180, aarch64: 42 },
  { name: "vhangup", x86_64: 153, aarch64: 58 },
  { name: "settimeofday", x86_64: 164, aarch64: 170 },
  { name: "clock_settime", x86_64: 227, aarch64: 112 },
  { name: "clock_adjtime", x86_64: 305, aarch64: 266 },
  { name: "adjtimex", x86_64: 159, aarch64: 171 },
  // Keyrings (shared with the host: not namespaced).
  { name: "add_key", x86_64: 248, aarch64: 217 },
  { name: "request_key", x86_64: 249, aarch64: 218 },
  { name: "keyctl", x86_64: 250, aarch64: 219 },
  // Namespaces: joining one, and (below) making one.
  { name: "setns", x86_64: 308, aarch64: 268 },
  // Other processes' memory and files.
  { name: "ptrace", x86_64: 101, aarch64: 117 },
  { name: "process_vm_readv", x86_64: 310, aarch64: 270 },
  { name: "process_vm_writev", x86_64: 311, aarch64: 271 },
  { name: "kcmp", x86_64: 312, aarch64: 272 },
  { name: "pidfd_getfd", x86_64: 438, aarch64: 438 },
];

/** The names of the calls the filter refuses outright (besides those checked by argument). */
export const BLOCKED_CALLS: readonly string[] = BLOCKED.map((call) =>
  call.name
);

const CALL = {
  unshare: { x86_64: 272, aarch64: 97 },
  clone: { x86_64: 56, aarch64: 220 },
  clone3: { x86_64: 435, aarch64: 435 },
  ioctl: { x86_64: 16, aarch64: 29 },
};

/** `AUDIT_ARCH_*`: the `arch` field of `seccomp_data`. */
const AUDIT_ARCH: Record<SeccompArch, number> = {
  x86_64: 0xc000003e,
  aarch64: 0xc00000b7,
};

/** x32 calls on x86_64 carry this bit in their number. */
const X32_SYSCALL_BIT = 0x40000000;

/** `CLONE_NEW*`: NS, CGROUP, UTS, IPC, USER, PID, NET. */
const CLONE_NAMESPACES = 0x7e020000;
/** `CLONE_NEWTIME` (only `unshare` takes it; for `clone` it is a signal bit). */
const CLONE_NEWTIME = 0x80;

/** Ioctls that push input into a terminal (`TIOCSTI`) or drive the console (`TIOCLINUX`). */
const TERMINAL_IOCTLS = [0x5412, 0x541c];

const EPERM = 1;
const ENOSYS = 38;
const RET_ALLOW = 0x7fff0000;
const RET_ERRNO = 0x00050000;

// Classic BPF opcodes.
const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JGE_K = 0x35;
const JSET_K = 0x45;
const RET_K = 0x06;

// Offsets in `struct seccomp_data`: nr, arch, then (after the instruction
// pointer) the six arguments, 64 bits each; on a little-endian machine the
// low 32 bits of argument i are at 16 + 8 i.
const NR = 0;
const ARCH = 4;
const ARG0_LOW = 16;
const ARG1_LOW = 24;

/** A BPF instruction, or a jump whose targets are labels. */
type Step =
  | { code: number; k: number; jt?: string; jf?: string }
  | { label: string };

/**
 * The filter for `arch`, as bytes for `bwrap --seccomp FD` (a `struct
 * sock_filter` array in the machine's byte order, little-endian on both).
 */
export function seccompFilter(arch: SeccompArch): Uint8Array {
  const nr = (call: { x86_64?: number; aarch64?: number }) => call[arch];
  const steps: Step[] = [
    { code: LD_W_ABS, k: ARCH },
    { code: JEQ_K, k: AUDIT_ARCH[arch], jf: "deny" },
    { code: LD_W_ABS, k: NR },
  ];
  if (arch === "x86_64") {
    steps.push({ code: JGE_K, k: X32_SYSCALL_BIT, jt: "deny" });
  }
  for (const call of BLOCKED) {
    const number = nr(call);
    if (number !== undefined) {
      steps.push({ code: JEQ_K, k: number, jt: "deny" });
    }
  }
  steps.push(
    { code: JEQ_K, k: nr(CALL.clone3)!, jt: "nosys" },
    { code: JEQ_K, k: nr(CALL.unshare)!, jt: "unshare" },
    { code: JEQ_K, k: nr(CALL.clone)!, jt: "clone" },
    { code: JEQ_K, k: nr(CALL.ioctl)!, jt: "ioctl" },
    { code: RET_K, k: RET_ALLOW },
    { label: "unshare" },
    { code: LD_W_ABS, k: ARG0_LOW },
    { code: JSET_K, k: CLONE_NAMESPACES | CLONE_NEWTIME, jt: "deny" },
    { code: RET_K, k: RET_ALLOW },
    { label: "clone" },
    { code: LD_W_ABS, k: ARG0_LOW },
    { code: JSET_K, k: CLONE_NAMESPACES, jt: "deny" },
    { code: RET_K, k: RET_ALLOW },
    { label: "ioctl" },
    { code: LD_W_ABS, k: ARG1_LOW },
    ...TERMINAL_IOCTLS.map((k) => ({ code: JEQ_K, k, jt: "deny" })),
    { code: RET_K, k: RET_ALLOW },
    { label: "nosys" },
    { code: RET_K, k: RET_ERRNO | ENOSYS },
    { label: "deny" },
    { code: RET_K, k: RET_ERRNO | EPERM },
  );
  return assemble(steps);
}

/** Resolves the labels into relative jumps and lays the program out as bytes. */
function assemble(steps: Step[]): Uint8Array {
  const at = new Map<string, number>();
  const program: Exclude<Step, { label: string }>[] = [];
  for (const step of steps) {
    if ("label" in step) at.set(step.label, program.length);
    else program.push(step);
  }
  const bytes = new Uint8Array(program.length * 8);
  const view = new DataView(bytes.buffer);
  program.forEach((step, index) => {
    const offset = (label: string | undefined) => {
      if (label === undefined) return 0;
      const jump = at.get(label)! - index - 1;
      if (jump < 0 || jump > 255) throw new Error(`seccomp jump to ${label}`);
      return jump;
    };
    view.setUint16(index * 8, step.code, true);
    view.setUint8(index * 8 + 2, offset(step.jt));
    view.setUint8(index * 8 + 3, offset(step.jf));
    view.setUint32(index * 8 + 4, step.k, true);
  });
  return bytes;
}
