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

/**
 * Flags for `deno run main.ts` only, never `deno compile`: a module imported
 * with `import()` has its module graph loaded when it is imported, not at
 * start. The binary loads its modules that way anyway (they are built into
 * it); `deno run` otherwise reads and resolves the graph of every subcommand
 * `main.ts` can import before it runs one (about 15 ms of every start,
 * `docs/performance.md`).
 */
export const DENO_RUN_ONLY_FLAGS: readonly string[] = [
  "--unstable-lazy-dynamic-imports",
];

/** Every flag `deno run main.ts` gets: the binary's, then {@linkcode DENO_RUN_ONLY_FLAGS}. */
export const DENO_RUN_FLAGS: readonly string[] = [
  ...RUNTIME_FLAGS,
  ...DENO_RUN_ONLY_FLAGS,
];
