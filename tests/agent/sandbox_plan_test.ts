/**
 * The sandbox plan (`lib/agent/sandbox.ts`) through its public functions, with
 * a real bubblewrap where it runs something: what a plan brings into view (and
 * refuses to), and what a process confined by `sandboxArgv` shares with the
 * host — fast enough to run for each of the module's mutants. The fixture
 * agent's view of the same sandbox is `sandbox_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { prepareAgentCommand } from "../../lib/providers.ts";
import {
  planSandbox,
  requireSandbox,
  sandboxArgv,
  type SandboxPlan,
  startsWithNpx,
  withSandboxEnv,
} from "../../lib/agent/sandbox.ts";
import { RunnerError } from "../../lib/errors.ts";
import { tempDir } from "../helpers.ts";
import { sandboxConfig, sandboxWorld } from "../sandbox_helpers.ts";

/** What `script` prints run by `sh` confined by `plan` (its workspace the cwd), with `env` set inside. */
function confinedShell(
  plan: SandboxPlan,
  script: string,
  env: { name: string; value: string }[] = [],
): string {
  const argv = withSandboxEnv(
    sandboxArgv(
      requireSandbox(),
      plan,
      ["/bin/sh", "-c", script],
      plan.writePaths.at(-1)!,
    ),
    env,
  );
  const output = new Deno.Command(argv[0], {
    args: argv.slice(1),
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    clearEnv: true,
    env: { PATH: "/usr/bin:/bin" },
  }).outputSync();
  const text = new TextDecoder();
  assert.ok(output.success, text.decode(output.stderr));
  return text.decode(output.stdout);
}

/** A SysV shared memory segment of the host (`ipcmk`); its id. */
function hostSharedMemory(): string {
  const output = new Deno.Command("ipcmk", { args: ["-M", "4096"] })
    .outputSync();
  assert.ok(output.success, "ipcmk (util-linux) made a segment");
  return new TextDecoder().decode(output.stdout).match(/(\d+)\s*$/)![1];
}

Deno.test("sandbox=confined refuses a workspace that would show the whole of $HOME: ~, a parent of it, or /", () => {
  const world = sandboxWorld();
  for (const workspace of [world.home, dirname(world.home), "/"]) {
    assert.throws(
      () =>
        prepareAgentCommand(sandboxConfig(world, [], { workspace }), {
          environment: world.environment,
        }),
      (error: unknown) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        error.detail?.key === "workspace" &&
        /would show the whole of \$HOME/.test(error.message),
      workspace,
    );
  }
  const inside = join(world.home, "project");
  const launch = prepareAgentCommand(
    sandboxConfig(world, [], { workspace: inside }),
    { environment: world.environment },
  );
  assert.equal(launch.sandbox?.mode, "confined");
  assert.equal(launch.sandbox?.writePaths.at(-1), inside);
});

Deno.test("sandbox plan: a program linked from PATH brings its package in read-only; an npx agent gets its npm cache read-write", () => {
  const home = tempDir("plan-home-");
  const pkg = join(home, ".nvm", "lib", "node_modules", "fake-acp");
  Deno.mkdirSync(join(pkg, "dist"), { recursive: true });
  Deno.writeTextFileSync(join(pkg, "package.json"), "{}");
  Deno.writeTextFileSync(join(pkg, "dist", "cli.js"), "#!/bin/sh\n");
  Deno.chmodSync(join(pkg, "dist", "cli.js"), 0o755);
  const bin = join(home, ".nvm", "bin");
  Deno.mkdirSync(bin, { recursive: true });
  Deno.symlinkSync(join(pkg, "dist", "cli.js"), join(bin, "fake-acp"));
  const workspace = tempDir("plan-ws-");
  const env = { HOME: home, PATH: `${bin}:/usr/bin` };
  const linked = planSandbox({
    network: "full",
    workspace,
    env,
    program: "fake-acp",
  });
  assert.ok(linked.readPaths.includes(bin), "the PATH directory");
  assert.ok(linked.readPaths.includes(pkg), "the package it links to");
  assert.deepEqual(linked.writePaths, [workspace]);
  const npx = planSandbox({ network: "full", workspace, env, program: "npx" });
  assert.deepEqual(npx.writePaths, [join(home, ".npm"), workspace]);
  assert.ok(Deno.statSync(join(home, ".npm")).isDirectory);
});

Deno.test("sandbox=confined: the agent shares no namespace with the host (PID, IPC, UTS, cgroup; network under none), so it sees neither the host's shared memory nor its cgroup path", () => {
  const shmid = hostSharedMemory();
  try {
    const hostShm = Deno.readTextFileSync("/proc/sysvipc/shm");
    assert.match(hostShm, new RegExp(`\\s${shmid}\\s`), "the host sees it");
    const home = tempDir("ns-home-");
    const plan = planSandbox({
      network: "none",
      workspace: tempDir("ns-ws-"),
      env: { HOME: home, PATH: "/usr/bin:/bin" },
    });
    const kinds = ["pid", "ipc", "uts", "cgroup", "net"];
    const seen = confinedShell(
      plan,
      `for kind in ${
        kinds.join(" ")
      }; do readlink /proc/self/ns/$kind; done; echo ==; cat /proc/sysvipc/shm; echo ==; cat /proc/self/cgroup`,
    ).split("==\n");
    const namespaces = seen[0].trim().split("\n");
    kinds.forEach((kind, index) => {
      const host = Deno.readLinkSync(`/proc/self/ns/${kind}`);
      assert.match(namespaces[index], new RegExp(`^${kind}:`));
      assert.notEqual(namespaces[index], host, `the host's ${kind} namespace`);
    });
    assert.doesNotMatch(seen[1], new RegExp(`\\s${shmid}\\s`));
    // Its own cgroup namespace: its cgroup is the root of what it sees.
    for (const line of seen[2].trim().split("\n")) {
      assert.match(line, /:\/$/, "the host's cgroup path");
    }
  } finally {
    new Deno.Command("ipcrm", { args: ["-m", shmid] }).outputSync();
  }
});

Deno.test("sandbox=confined: an env entry is set inside the sandbox, the plan's TMPDIR wins, and $HOME inside is an empty writable scratch directory", () => {
  const home = tempDir("env-home-");
  Deno.writeTextFileSync(join(home, "secret.txt"), "home secret\n");
  const plan = planSandbox({
    network: "none",
    workspace: tempDir("env-ws-"),
    env: { HOME: home, PATH: "/usr/bin:/bin" },
  });
  const seen = confinedShell(
    plan,
    'printf "%s %s\\n" "$GREETING" "$TMPDIR"; ls -A "$HOME"; touch "$HOME/new" && echo wrote; pwd',
    [
      { name: "GREETING", value: "hello" },
      { name: "TMPDIR", value: home },
      { name: "HOME", value: home },
    ],
  );
  assert.deepEqual(seen.split("\n"), [
    "hello /tmp",
    "wrote",
    plan.writePaths.at(-1),
    "",
  ]);
  assert.deepEqual([...Deno.readDirSync(home)].map((entry) => entry.name), [
    "secret.txt",
  ]);
});

Deno.test("sandbox plan without $HOME: / and relative PATH entries are not brought in, nor ~ state directories; the agent still runs; a sandbox path that is relative or ~/ is refused", () => {
  const workspace = tempDir("nohome-ws-");
  const plan = planSandbox({
    network: "none",
    workspace,
    env: { PATH: "/:bin:./tools:/usr/bin" },
    // A state directory under a $HOME there is not: none.
    stateDirs: ["~/.codex"],
  });
  assert.deepEqual(plan.readPaths, ["/usr/bin"]);
  assert.deepEqual(plan.writePaths, [workspace]);
  assert.equal(plan.home, undefined);
  assert.equal(
    confinedShell(plan, "echo confined; pwd"),
    `confined\n${workspace}\n`,
  );
  // Each refused path, and the list it was given in.
  const refusedIn: Record<string, string> = {
    shared: "readPaths",
    "../up": "writePaths",
    "~/notes": "readPaths",
    "~": "writePaths",
  };
  for (const [path, key] of Object.entries(refusedIn)) {
    assert.throws(
      () =>
        planSandbox({
          network: "none",
          workspace,
          env: { PATH: "/usr/bin" },
          [key]: [path],
        }),
      (error: unknown) =>
        error instanceof RunnerError && error.code === "config.invalid" &&
        error.message.includes(
          `must be absolute or start with ~/ (got "${path}")`,
        ),
      path,
    );
  }
});

Deno.test("sandbox plan: state directories are made (nested ones too), a state file is not made a directory, and ~ paths are under $HOME", () => {
  const home = tempDir("state-home-");
  const workspace = tempDir("state-ws-");
  const plan = planSandbox({
    network: "none",
    workspace,
    // $HOME and its parent on PATH would show the whole home.
    env: { HOME: home, PATH: `${home}:${dirname(home)}/:/usr/bin` },
    stateDirs: ["~/.local/share/agent", "~/.agent.json"],
    readPaths: ["~/shared", "/opt/x/../y"],
    writePaths: ["~"],
  });
  assert.ok(Deno.statSync(join(home, ".local/share/agent")).isDirectory);
  assert.throws(() => Deno.statSync(join(home, ".agent.json")));
  assert.deepEqual(plan.readPaths, [
    "/usr/bin",
    join(home, "shared"),
    "/opt/y",
  ]);
  assert.deepEqual(plan.writePaths, [
    join(home, ".local/share/agent"),
    join(home, ".agent.json"),
    home,
    workspace,
  ]);
  assert.equal(plan.home, home);
});

Deno.test("sandbox plan: a program named by its path brings in nothing above it; one linked to a directory without a package brings that directory", () => {
  const home = tempDir("program-home-");
  const workspace = tempDir("program-ws-");
  const pkg = join(home, "agent-pkg");
  Deno.mkdirSync(join(pkg, "dist"), { recursive: true });
  Deno.writeTextFileSync(join(pkg, "package.json"), "{}");
  const cli = join(pkg, "dist", "cli.js");
  Deno.writeTextFileSync(cli, "#!/bin/sh\n");
  Deno.chmodSync(cli, 0o755);
  const env = { HOME: home, PATH: "/usr/bin" };
  const named = planSandbox({ network: "none", workspace, env, program: cli });
  assert.deepEqual(named.readPaths, ["/usr/bin"]);
  // A link to a program in a directory with no package.json above it.
  const tools = tempDir("program-tools-");
  Deno.writeTextFileSync(join(tools, "agent"), "#!/bin/sh\n");
  Deno.chmodSync(join(tools, "agent"), 0o755);
  const bin = join(home, "bin");
  Deno.mkdirSync(bin);
  Deno.symlinkSync(join(tools, "agent"), join(bin, "agent"));
  const linked = planSandbox({
    network: "none",
    workspace,
    env: { HOME: home, PATH: `${bin}:/usr/bin` },
    program: "agent",
  });
  assert.deepEqual(linked.readPaths, [bin, "/usr/bin", tools]);
});

Deno.test("sandbox plan: a directory whose name only begins like $HOME's is neither refused as the workspace nor dropped from PATH", () => {
  const parent = tempDir("prefix-");
  const home = join(parent, "homedir");
  const sibling = join(parent, "home");
  Deno.mkdirSync(home);
  Deno.mkdirSync(sibling);
  const plan = planSandbox({
    network: "none",
    workspace: sibling,
    env: { HOME: home, PATH: `${sibling}:/usr/bin` },
  });
  assert.deepEqual(plan.readPaths, [sibling, "/usr/bin"]);
  assert.deepEqual(plan.writePaths, [sibling]);
});

Deno.test("sandbox=confined: a $HOME that is a system directory or inside one (HOME=/usr, /usr/lib) is not covered by an empty one, so the system's files stay; sandbox-network=host shares the host's network", () => {
  for (const home of ["/usr", "/usr/lib"]) {
    const plan = planSandbox({
      network: "host",
      workspace: tempDir("sys-home-ws-"),
      env: { HOME: home, PATH: "/usr/bin:/bin" },
    });
    assert.equal(plan.home, home);
    const seen = confinedShell(
      plan,
      "readlink /proc/self/ns/net; ls /usr/lib/os-release",
    );
    assert.equal(
      seen,
      `${Deno.readLinkSync("/proc/self/ns/net")}\n/usr/lib/os-release\n`,
      home,
    );
  }
});

Deno.test("startsWithNpx: npx, npx.cmd and npm exec start an agent with npx; npm alone, another program or nothing do not", () => {
  for (
    const argv of [["npx", "agent"], ["/usr/bin/npx"], ["npx.cmd"], [
      "npm",
      "exec",
      "agent",
    ], ["/opt/node/bin/npm", "exec"]]
  ) {
    assert.equal(startsWithNpx(argv), true, argv.join(" "));
  }
  for (
    const argv of [["npm"], ["npm", "install"], ["node", "exec"], ["npxx"], [
      "exec",
      "exec",
    ], []]
  ) {
    assert.equal(startsWithNpx(argv), false, argv.join(" "));
  }
});
