/**
 * The Deno flags the runner runs with — in `deno task start`, in
 * `scripts/compile.ts` and in every test that spawns the CLI: its permission
 * set (why each flag cannot be narrower is in `docs/permissions.md`) and its
 * V8 settings (`docs/performance.md`).
 *
 * @module
 */

/** The runtime permission flags, as passed to `deno run` / `deno compile`. */
export const RUNTIME_PERMISSION_FLAGS: readonly string[] = [
  "--allow-read",
  "--allow-write",
  "--allow-net",
  "--allow-env",
  "--allow-run",
  "--no-prompt",
];

/**
 * The V8 settings: a 1 MiB young-generation semi-space (V8's default grows to
 * 16 MiB). A run's garbage is short-lived chunks and events; the smaller
 * nursery keeps a streaming `runner run` about 25 MiB smaller at the same CPU.
 */
export const RUNTIME_V8_FLAGS: readonly string[] = [
  "--v8-flags=--max-semi-space-size=1",
];

/** Every flag the binary is compiled with: permissions, then V8 settings. */
export const RUNTIME_FLAGS: readonly string[] = [
  ...RUNTIME_PERMISSION_FLAGS,
  ...RUNTIME_V8_FLAGS,
];
