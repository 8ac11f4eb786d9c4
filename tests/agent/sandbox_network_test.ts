/**
 * The confined network's rules (`lib/agent/sandbox_network.ts`) through its
 * public functions and the CLI: which of a run's endpoints are forwarded, the
 * order a caller may only narrow in, and what happens where the tools of
 * `sandbox-network=full` are missing. The attacks on a confined agent's
 * network are `security/sandbox_network_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { findOnPath } from "../../lib/agent/find_executable.ts";
import {
  loopbackPorts,
  type SandboxNetwork,
  sandboxNetworkAvailability,
  widerNetwork,
} from "../../lib/agent/sandbox_network.ts";
import { runCli, spawnCli, tempDir } from "../helpers.ts";
import {
  assertKilledRunnerLeavesNothing,
  keysAsFlags,
  sandboxKeys,
  sandboxWorld,
} from "../sandbox_helpers.ts";

Deno.test("network: of the run's endpoints only loopback ones are forwarded (every spelling of loopback, default ports), never the port of another host's URL", () => {
  assert.deepEqual(
    loopbackPorts([
      "http://127.0.0.1:8080/mcp",
      "http://localhost:8081/",
      "http://[::1]:8082/",
      "http://127.0.0.10:8083/",
      "http://127.1.2.3/",
      "http://127.10.20.30:8084/",
      "https://localhost/",
      "http://10.0.0.5:5432/",
      "https://example.com:6379/",
      "http://127.0.0.1.example.com:7000/",
      "http://[::2]:7001/",
      "not a url",
    ]),
    [8080, 8081, 8082, 8083, 80, 8084, 443],
  );
});

Deno.test("network: a wider network is one further from none (none < full < host); the same one is not wider", () => {
  const order: SandboxNetwork[] = ["none", "full", "host"];
  for (const [i, wanted] of order.entries()) {
    for (const [j, limit] of order.entries()) {
      assert.equal(widerNetwork(wanted, limit), i > j, `${wanted} ${limit}`);
    }
  }
});

/** The names in `dir`. */
function leftIn(dir: string): string[] {
  return [...Deno.readDirSync(dir)].map((entry) => entry.name);
}

/** A PATH directory holding links to the host's `names` (and nothing else). */
function pathWith(names: string[]): string {
  const dir = tempDir("path-");
  for (const name of names) {
    Deno.symlinkSync(
      findOnPath(name, "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")!,
      join(dir, name),
    );
  }
  return dir;
}

Deno.test("network: sandbox-network=full is unavailable without pasta or unshare on the runner's PATH, and a confined run then fails with sandbox.unavailable before its agent starts", async () => {
  assert.deepEqual(sandboxNetworkAvailability(pathWith(["pasta", "unshare"])), {
    available: true,
  });
  for (const missing of ["pasta", "unshare"]) {
    const path = pathWith(["pasta", "unshare"].filter((n) => n !== missing));
    const availability = sandboxNetworkAvailability(path);
    assert.equal(availability.available, false, missing);
    assert.match(
      availability.reason!,
      /^sandbox-network=full needs pasta \(apt-get install passt/,
    );
  }
  const world = sandboxWorld();
  const record = join(tempDir(), "record.jsonl");
  const keys = sandboxKeys(world, ["--record", record]);
  const tmp = tempDir("runner-tmp-");
  const result = await runCli(["run", ...keysAsFlags(keys), "hi"], {
    env: {
      ...world.environment,
      PATH: pathWith(["bwrap", "ps", "unshare"]),
      TMPDIR: tmp,
    },
  });
  assert.equal(result.code, 1, result.stderr);
  assert.match(
    result.stderr,
    /error \[sandbox\.unavailable\]: sandbox-network=full needs pasta/,
  );
  assert.throws(() => Deno.statSync(record), "the agent never started");
  assert.deepEqual(leftIn(tmp), [], "nothing left behind");
});

Deno.test("network: a runner whose PATH has neither sh nor mkfifo (a service's bare PATH) still gives a confined agent its network", async () => {
  const world = sandboxWorld();
  const workspace = tempDir("no-sh-ws-");
  const record = join(workspace, "record.jsonl");
  const keys = sandboxKeys(world, ["--record", record], { workspace });
  const path = pathWith(["bwrap", "ps", "unshare", "pasta"]);
  const result = await runCli(["run", ...keysAsFlags(keys), "hi"], {
    env: { ...world.environment, PATH: path },
  });
  assert.equal(result.code, 0, result.stderr);
  assert.ok(Deno.statSync(record).isFile, "the agent ran");
});

/** The live children of `parent` whose command line holds `word`: their pids. */
function childrenWith(parent: number, word: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`);
      if (ppid === parent && cmdline.includes(word)) {
        found.push(Number(entry.name));
      }
    } catch { /* gone meanwhile */ }
  }
  return found;
}

Deno.test("network: pasta, which runs on the host, gets none of the runner's environment (its secrets least); a runner killed -9 leaves nothing of the network in TMPDIR", async () => {
  const world = sandboxWorld();
  const secret = `sk-pasta-${crypto.randomUUID()}`;
  const keys = sandboxKeys(world, ["--stall-prompt"]);
  const tmp = tempDir("runner-tmp-");
  const child = spawnCli(["run", ...keysAsFlags(keys), "--json", "hi"], {
    env: { ...world.environment, RUNNER_TEST_SECRET: secret, TMPDIR: tmp },
  });
  await assertKilledRunnerLeavesNothing(child, {
    marker: world.marker,
    until: '"message.delta"',
    whileAlive: () => {
      const pasta = childrenWith(child.pid, "--dns-forward");
      assert.equal(pasta.length, 1, "the run's pasta");
      const environment = Deno.readTextFileSync(`/proc/${pasta[0]}/environ`);
      assert.ok(!environment.includes(secret), "the runner's secret");
      assert.equal(environment, "");
    },
  });
  assert.deepEqual(leftIn(tmp), []);
});

/** A PATH directory with the tools of sandbox-network=full, `name` among them a script. */
function pathWithFake(name: string, script: string): string {
  const tools = ["bwrap", "ps", "unshare", "pasta", "ip", "setpriv", "mkfifo"];
  const dir = pathWith(tools.filter((tool) => tool !== name));
  Deno.writeTextFileSync(join(dir, name), script);
  Deno.chmodSync(join(dir, name), 0o755);
  return dir;
}

Deno.test("network: where pasta fails, the host's addresses cannot be listed or the FIFOs cannot be made, a confined run fails with sandbox.unavailable saying what failed, before its agent starts, and leaves nothing in TMPDIR", async () => {
  const cases = [
    {
      name: "pasta",
      script:
        "#!/bin/sh\necho 'pasta: syslog unavailable' >&2\necho 'No routable interface for IPv4' >&2\nexit 1\n",
      said:
        /error \[sandbox\.unavailable\]: sandbox-network=full: pasta could not give the agent its network \(No routable interface for IPv4\)\. Check that user namespaces are allowed/,
    },
    {
      name: "pasta",
      script: "#!/bin/sh\nexit 1\n",
      said:
        /error \[sandbox\.unavailable\]: sandbox-network=full: pasta could not give the agent its network \(it exited\)\./,
    },
    {
      name: "ip",
      script: "#!/bin/sh\necho 'Cannot open netlink socket' >&2\nexit 2\n",
      said:
        /error \[sandbox\.unavailable\]: sandbox-network=full: could not list the host's addresses with \S+\/ip \(Cannot open netlink socket\)\./,
    },
    {
      name: "mkfifo",
      script: "#!/bin/sh\necho 'mkfifo: Permission denied' >&2\nexit 1\n",
      said:
        /error \[sandbox\.unavailable\]: sandbox-network=full: could not make the network's FIFOs \(mkfifo: Permission denied\); check that TMPDIR is writable\./,
    },
  ];
  for (const { name, script, said } of cases) {
    const world = sandboxWorld();
    const workspace = tempDir("failing-net-ws-");
    const record = join(workspace, "record.jsonl");
    const keys = sandboxKeys(world, ["--record", record], { workspace });
    const tmp = tempDir("runner-tmp-");
    const result = await runCli(["run", ...keysAsFlags(keys), "hi"], {
      env: {
        ...world.environment,
        PATH: pathWithFake(name, script),
        TMPDIR: tmp,
      },
    });
    assert.equal(result.code, 1, result.stderr);
    assert.match(result.stderr, said, name);
    assert.throws(() => Deno.statSync(record), `${name}: the agent ran`);
    assert.deepEqual(leftIn(tmp), [], name);
  }
});
