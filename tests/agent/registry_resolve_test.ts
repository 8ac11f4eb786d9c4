import assert from "node:assert/strict";
import { join } from "node:path";
import { RunnerError } from "../../lib/errors.ts";
import { parseRunConfig } from "../../lib/config.ts";
import {
  prepareAgentCommand,
  registryIdOf,
  resolveRegistryProvider,
} from "../../lib/providers.ts";
import {
  packageArgv,
  planLaunch,
} from "../../lib/agent/registry/launch_plan.ts";
import { readCatalogue } from "../../lib/agent/registry/catalogue.ts";
import { outputWithInput, tempDir } from "../helpers.ts";
import { remoteScript } from "../../lib/locations/ssh.ts";
import { platformKey } from "./registry_server.ts";

const NPX_AGENT = {
  id: "npx-agent",
  name: "npx agent",
  version: "2.1.0",
  description: "",
  distribution: {
    npx: { package: "@acme/agent@latest", args: ["--acp"], env: {} },
  },
};

/** A file:// registry of `agents`. */
function fileRegistry(agents: unknown[]): string {
  const path = join(tempDir(), "registry.json");
  Deno.writeTextFileSync(path, JSON.stringify({ version: "1", agents }));
  return `file://${path}`;
}

Deno.test("npx and uvx packages run pinned: @latest, a range or no version is pinned to the registry's version; an exact one is kept", () => {
  const npx = (spec: string, cmd?: string) =>
    packageArgv(
      "npx",
      { package: spec, args: ["--acp"], env: {}, ...(cmd ? { cmd } : {}) },
      "2.1.0",
    );
  assert.deepEqual(npx("@acme/agent@latest"), [
    "npx",
    "-y",
    "@acme/agent@2.1.0",
    "--acp",
  ]);
  assert.deepEqual(npx("agent"), ["npx", "-y", "agent@2.1.0", "--acp"]);
  assert.deepEqual(npx("agent@^2"), ["npx", "-y", "agent@2.1.0", "--acp"]);
  assert.deepEqual(npx("@acme/agent@2.0.9"), [
    "npx",
    "-y",
    "@acme/agent@2.0.9",
    "--acp",
  ]);
  assert.deepEqual(npx("@acme/tools@latest", "acme-acp"), [
    "npx",
    "-y",
    "--package",
    "@acme/tools@2.1.0",
    "acme-acp",
    "--acp",
  ]);
  const uvx = (spec: string, cmd?: string) =>
    packageArgv(
      "uvx",
      { package: spec, args: [], env: {}, ...(cmd ? { cmd } : {}) },
      "2.1.0",
    );
  assert.deepEqual(uvx("acme-agent"), ["uvx", "acme-agent==2.1.0"]);
  assert.deepEqual(uvx("acme-agent@latest"), ["uvx", "acme-agent==2.1.0"]);
  assert.deepEqual(uvx("acme-agent>=1"), ["uvx", "acme-agent==2.1.0"]);
  assert.deepEqual(uvx("acme-agent==1.5.0", "acme"), [
    "uvx",
    "--from",
    "acme-agent==1.5.0",
    "acme",
  ]);
});

Deno.test("a binary runs here when this platform has one; else a package; no distribution names the platforms that have one", () => {
  const [agent] = readCatalogue({
    agents: [{
      id: "both",
      version: "1.0.0",
      distribution: {
        npx: { package: "both@1.0.0" },
        binary: {
          [platformKey()]: { archive: "https://x.test/a.tgz", cmd: "a" },
        },
      },
    }],
  }).agents;
  assert.equal(planLaunch(agent, { where: "here" }).kind, "binary");
  assert.equal(planLaunch(agent, { where: "remote" }).kind, "npx");
  const [elsewhere] = readCatalogue({
    agents: [{
      id: "elsewhere",
      version: "1.0.0",
      distribution: {
        binary: {
          "windows-x86_64": { archive: "https://x.test/a.zip", cmd: "a.exe" },
        },
      },
    }],
  }).agents;
  assert.throws(
    () => planLaunch(elsewhere, { where: "here", platform: "linux-x86_64" }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "agent.no_distribution");
      assert.equal(error.retryable, false);
      assert.match(
        error.message,
        /no distribution for linux-x86_64: binaries exist for windows-x86_64/,
      );
      return true;
    },
  );
});

Deno.test("remote-ssh runs a registry agent's package; a binary-only one only when the remote PATH has its program, else it says why", async () => {
  const registryUrl = fileRegistry([
    NPX_AGENT,
    {
      id: "binary-only",
      version: "1.0.0",
      distribution: {
        binary: {
          "linux-x86_64": {
            archive: "https://x.test/a.tgz",
            cmd: "./bin/binary-only-acp",
            args: ["--acp"],
          },
          "windows-x86_64": { archive: "https://x.test/a.zip", cmd: "b.exe" },
        },
      },
    },
  ]);
  const dataDir = tempDir();
  const remote = (provider: string, shell = "bash") =>
    parseRunConfig({
      provider,
      location: "remote-ssh",
      "ssh-target": "user@host",
      workspace: "/w",
      "remote-shell": shell,
      "registry-url": registryUrl,
    });
  const launch = await resolveRegistryProvider(remote("npx-agent"), {
    dataDir,
  });
  assert.deepEqual(launch?.argv, ["npx", "-y", "@acme/agent@2.1.0", "--acp"]);
  const command = prepareAgentCommand(remote("npx-agent"), {
    registry: launch,
  });
  assert.equal(command.commandText, "npx -y @acme/agent@2.1.0 --acp");
  assert.equal(command.commandSource, "registry");
  // Binary-only: the remote script runs the program if its PATH has it.
  const binary = prepareAgentCommand(remote("binary-only"), {
    registry: await resolveRegistryProvider(remote("binary-only"), { dataDir }),
  });
  assert.deepEqual(binary.choices?.executable, ["binary-only-acp", "--acp"]);
  const workspace = tempDir();
  const runRemote = (path: string) =>
    outputWithInput(
      new Deno.Command("bash", {
        args: ["-c", remoteScript(workspace, binary)],
        env: { PATH: path },
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      }),
      "\n",
    );
  const bare = await runRemote("/usr/bin:/bin");
  assert.equal(bare.code, 127);
  assert.match(
    bare.stderr,
    /binary-only 1\.0\.0 ships only as a binary \(for linux-x86_64, windows-x86_64\), which a remote-ssh run does not install, and binary-only-acp is not on the remote PATH/,
  );
  const bin = tempDir();
  Deno.writeTextFileSync(
    join(bin, "binary-only-acp"),
    '#!/bin/sh\necho "the remote program ran with $1"\n',
  );
  Deno.chmodSync(join(bin, "binary-only-acp"), 0o755);
  const found = await runRemote(`${bin}:/usr/bin:/bin`);
  assert.equal(found.code, 0, found.stderr);
  assert.equal(found.stdout, "the remote program ran with --acp\n");
  // A PowerShell remote has no such lookup: refused up front.
  await assert.rejects(
    resolveRegistryProvider(remote("binary-only", "powershell"), { dataDir }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "agent.no_distribution");
      assert.match(error.message, /ships only as a binary/);
      return true;
    },
  );
});

Deno.test("presets, custom and the seed's non-presets keep their meaning; registry: names a registry agent whatever its id", () => {
  assert.equal(registryIdOf("codex"), undefined);
  assert.equal(registryIdOf("custom"), undefined);
  assert.equal(registryIdOf("goose"), undefined);
  assert.equal(registryIdOf("registry:goose"), "goose");
  assert.equal(registryIdOf("some-agent"), "some-agent");
});

Deno.test("a wanted version that is neither installed nor the registry's is refused, never swapped", async () => {
  const config = parseRunConfig({
    provider: "npx-agent",
    workspace: "/w",
    "provider-version": "1.0.0",
    "registry-url": fileRegistry([NPX_AGENT]),
  });
  await assert.rejects(
    resolveRegistryProvider(config, { dataDir: tempDir() }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "agent.version_unavailable");
      assert.match(error.message, /npx-agent 1\.0\.0 is not installed here/);
      assert.match(error.message, /now lists 2\.1\.0/);
      return true;
    },
  );
});

Deno.test("registry-url takes https, file and loopback http only", () => {
  for (const url of ["http://example.com/r.json", "ftp://x/r.json", "nope"]) {
    assert.throws(
      () =>
        parseRunConfig({ provider: "x", workspace: "/w", "registry-url": url }),
      (error) =>
        error instanceof RunnerError && error.code === "config.invalid",
      url,
    );
  }
  for (
    const url of [
      "https://mirror.example/r.json",
      "file:///srv/r.json",
      "http://127.0.0.1:8080/r.json",
    ]
  ) {
    assert.equal(
      parseRunConfig({ provider: "x", workspace: "/w", "registry-url": url })
        .registryUrl,
      url,
    );
  }
});

Deno.test("a registry URL's credentials never reach an error message", async () => {
  const secret = "s3cr3t-mirror-password";
  const config = parseRunConfig({
    provider: "some-agent",
    workspace: "/w",
    "registry-url": `https://user:${secret}@127.0.0.1:1/r.json?token=${secret}`,
  });
  await assert.rejects(
    resolveRegistryProvider(config, { dataDir: tempDir() }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "registry.unreachable");
      assert.equal(error.retryable, true);
      assert.ok(!error.message.includes(secret), error.message);
      assert.ok(!JSON.stringify(error.detail).includes(secret));
      assert.match(error.message, /https:\/\/127\.0\.0\.1:1\/r\.json\?…/);
      return true;
    },
  );
});

Deno.test("an id or a version that is not one path segment is refused before anything is read", async () => {
  const dataDir = tempDir();
  // An install the traversal would reach, were the names joined as given.
  // (<data>/agents/../elsewhere/1.0.0 is <data>/elsewhere/1.0.0.)
  const outside = join(dataDir, "data", "elsewhere", "1.0.0");
  Deno.mkdirSync(outside, { recursive: true });
  Deno.writeTextFileSync(
    join(outside, "receipt.json"),
    JSON.stringify({
      id: "../elsewhere",
      version: "1.0.0",
      cmd: "x",
      args: [],
    }),
  );
  const unreachable = "file:///nonexistent/registry.json";
  for (
    const [provider, version, code] of [
      ["../elsewhere", "1.0.0", "provider.unknown"],
      ["registry:../elsewhere", "1.0.0", "provider.unknown"],
      ["some-agent", "../../elsewhere/1.0.0", "config.invalid"],
    ] as const
  ) {
    const config = parseRunConfig({
      provider,
      workspace: "/w",
      "provider-version": version,
      "registry-url": unreachable,
    });
    await assert.rejects(
      resolveRegistryProvider(config, { dataDir: join(dataDir, "data") }),
      (error) => error instanceof RunnerError && error.code === code,
      provider,
    );
  }
});
