/**
 * The Deno permission set the runner runs with — in `deno task start`, in
 * `scripts/compile.ts` and in every test that spawns the CLI. Why each flag
 * cannot be narrower is in `docs/permissions.md`.
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
