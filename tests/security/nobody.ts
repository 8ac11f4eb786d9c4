/**
 * Starting the runner as an unprivileged user (`nobody`, who can make user
 * namespaces of its own) from a test that runs as root: `setpriv`, the
 * directories `nobody` owns, and an environment with only what `nobody`
 * may read.
 *
 * @module
 */

import { dirname, join, resolve } from "node:path";
import { tempDir } from "../helpers.ts";

/** `nobody`'s ids. */
export const NOBODY = { uid: 65534, gid: 65534 };

/** The command that runs the rest as `nobody` (needs root). */
export const AS_NOBODY: string[] = [
  "setpriv",
  `--reuid=${NOBODY.uid}`,
  `--regid=${NOBODY.gid}`,
  "--clear-groups",
  "--",
];

/** A directory `nobody` owns (its parent, the test's TMPDIR, made passable by {@linkcode passableTempRoot}). */
export function nobodysDir(prefix: string): string {
  const dir = tempDir(prefix);
  Deno.chownSync(dir, NOBODY.uid, NOBODY.gid);
  return dir;
}

/**
 * Lets `nobody` pass through the directories that hold the test's temp dirs
 * (up to `/`: a private `TMPDIR` is closed to others); the function that
 * restores them.
 */
export function passableTempRoot(): () => void {
  const changed: { dir: string; mode: number }[] = [];
  let dir = resolve(tempDir(), "..");
  while (true) {
    const mode = Deno.statSync(dir).mode! & 0o7777;
    if (!(mode & 0o001)) {
      Deno.chmodSync(dir, mode | 0o001);
      changed.push({ dir, mode });
    }
    const parent = dirname(dir);
    if (parent === dir) break;
    dir = parent;
  }
  return () => {
    for (const { dir, mode } of changed) Deno.chmodSync(dir, mode);
  };
}

/** `nobody`'s world: a home with a secret, Deno's cache, and the runner's environment. */
export interface NobodyWorld {
  /** `nobody`'s `HOME`. */
  home: string;
  /** A file in `home` the agent must not see. */
  homeSecret: string;
  /** A Deno cache `nobody` may fill. */
  denoDir: string;
  /** The runner's environment: only what `nobody` may read (root's own tool directories are not). */
  environment: Record<string, string>;
}

/** A fresh {@linkcode NobodyWorld} (call {@linkcode passableTempRoot} first). */
export function nobodyWorld(): NobodyWorld {
  const home = nobodysDir("nobody-home-");
  const homeSecret = join(home, "secret.txt");
  Deno.writeTextFileSync(homeSecret, "nobody's secret\n");
  const denoDir = nobodysDir("nobody-deno-");
  return {
    home,
    homeSecret,
    denoDir,
    environment: {
      PATH: "/usr/local/bin:/usr/bin:/bin",
      HOME: home,
      DENO_DIR: denoDir,
      TMPDIR: nobodysDir("nobody-tmp-"),
      RUNNER_DATA_DIR: nobodysDir("nobody-data-"),
      NO_COLOR: "1",
    },
  };
}

/**
 * A test of a runner started as `nobody` (which needs root: it is ignored
 * otherwise): `body` gets a fresh {@linkcode NobodyWorld}, the test's temp
 * root passable meanwhile.
 */
export function nobodyTest(
  name: string,
  body: (nobody: NobodyWorld) => Promise<void>,
): void {
  Deno.test({
    name,
    ignore: Deno.uid() !== 0,
    async fn() {
      const restore = passableTempRoot();
      try {
        await body(nobodyWorld());
      } finally {
        restore();
      }
    },
  });
}
