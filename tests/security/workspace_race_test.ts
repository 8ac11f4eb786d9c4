/**
 * The racing caller: a `workspace` (or `session-cwd`) that goes through a
 * link another process keeps swapping between an allowed directory, a
 * directory outside the operator's roots and the runner's data dir, sent
 * while runs start. The floor checks the real path; the run must then use
 * that path, so a link swapped after the check never moves the agent: every
 * run is refused or works in the allowed directory, through `POST /v1/runs`,
 * the n8n webhook's query and a hub's `run.start` to a daemon. Issue 35,
 * break 7 (the residual race of the first floor).
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { createDaemonJobRunner } from "../../lib/daemon/job.ts";
import { daemonFloorFromFlags } from "../../lib/daemon/job_floor.ts";
import type { JsonObject } from "../../lib/relay.ts";
import { agentCommand, tempDir } from "../helpers.ts";
import { hubJob } from "../daemon_test_helpers.ts";
import {
  postJson,
  type ServeProcess,
  sseEvents,
  startServe,
} from "../serve_test_helpers.ts";

const TOKEN = "race-test-token-" + crypto.randomUUID();
const AUTH = { authorization: `Bearer ${TOKEN}` };

/** Runs accepted before a test may stop (each is a chance to land outside). */
const ACCEPTED_RUNS = 8;
/** Attempts at most, refused ones included. */
const MAX_ATTEMPTS = 80;

/** The directories of one race: a file `where.txt` in each names its place. */
interface RaceWorld {
  roots: string;
  allowed: string;
  outside: string;
  dataDir: string;
  /** The link the racer swaps, inside the roots. */
  link: string;
}

function raceWorld(): RaceWorld {
  const roots = tempDir("race-roots-");
  const allowed = join(roots, "allowed");
  Deno.mkdirSync(join(allowed, "sub"), { recursive: true });
  Deno.writeTextFileSync(join(allowed, "where.txt"), "in-allowed\n");
  Deno.writeTextFileSync(join(allowed, "sub", "where.txt"), "in-sub\n");
  const outside = tempDir("race-outside-");
  Deno.writeTextFileSync(join(outside, "where.txt"), "in-outside\n");
  const dataDir = tempDir("race-data-");
  Deno.writeTextFileSync(join(dataDir, "where.txt"), "in-data\n");
  return { roots, allowed, outside, dataDir, link: join(roots, "link") };
}

const SWAPPER = `
import os, sys
link, targets = sys.argv[1], sys.argv[2:]
spare = link + ".next"
i = 0
while True:
    try:
        os.unlink(spare)
    except FileNotFoundError:
        pass
    os.symlink(targets[i % len(targets)], spare)
    os.replace(spare, link)
    i += 1
    if i == len(targets):
        print("swapping", flush=True)
`;

/** A process that swaps `link` among `targets` as fast as it can, until stopped. */
async function startSwapper(link: string, targets: string[]) {
  const child = new Deno.Command("python3", {
    args: ["-c", SWAPPER, link, ...targets],
    stdin: "null",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream())
    .getReader();
  // Every target has been the link's once: the race is on.
  const first = await reader.read();
  assert.match(first.value ?? "", /swapping/);
  return {
    async stop() {
      child.kill("SIGKILL");
      await child.status;
      await reader.cancel();
    },
  };
}

/** What one run showed: refused (with the key), or the reply's text. */
type Outcome = { refused: string } | { reply: string };

/**
 * Starts runs until {@linkcode ACCEPTED_RUNS} were accepted; each accepted
 * one must have worked where `expected` says, never in another place.
 */
async function raceRuns(
  start: () => Promise<Outcome>,
  expected: RegExp,
): Promise<{ accepted: number; refused: number }> {
  let accepted = 0;
  let refused = 0;
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const outcome = await start();
    if ("refused" in outcome) {
      refused++;
      continue;
    }
    assert.doesNotMatch(outcome.reply, /in-outside|in-data/, outcome.reply);
    assert.match(outcome.reply, expected, outcome.reply);
    if (++accepted === ACCEPTED_RUNS) break;
  }
  assert.ok(accepted > 0, "no run was accepted: the race proved nothing");
  return { accepted, refused };
}

function serveArgs(world: RaceWorld, flags: string[]): string[] {
  return [
    ...["--api-token", TOKEN, "--provider", "custom"],
    ...["--workspace", world.allowed, "--workspace-roots", world.roots],
    ...["--langbot-assets-enabled", "false"],
    ...["--acp-command", agentCommand(flags)],
  ];
}

async function postRun(
  serve: ServeProcess,
  config: Record<string, unknown>,
): Promise<Outcome> {
  const response = await postJson(`${serve.url}/v1/runs`, {
    input: { text: "where am I" },
    config,
  }, AUTH);
  if (response.status === 403) {
    const body = await response.json();
    return { refused: String(body.error?.message).split(":")[0] };
  }
  const events = await sseEvents(response);
  const wire = JSON.stringify(events);
  assert.equal(events.at(-1)?.type, "run.completed", wire);
  return { reply: wire };
}

Deno.test("a workspace link swapped while runs start never moves the agent out of the roots (POST /v1/runs, n8n)", async () => {
  const world = raceWorld();
  const serve = await startServe({
    dataDir: world.dataDir,
    args: serveArgs(world, ["--try-read", "where.txt"]),
  });
  const swapper = await startSwapper(world.link, [
    world.allowed,
    world.outside,
    world.dataDir,
  ]);
  try {
    await raceRuns(
      () => postRun(serve, { workspace: world.link }),
      /try-read where.txt: ok in-allowed/,
    );
    // The webhook's query is the same floor, and the same real path.
    await raceRuns(async () => {
      const query = new URLSearchParams({
        workspace: world.link,
        stream: "false",
      });
      const response = await postJson(
        `${serve.url}/v1/webhooks/n8n?${query}`,
        { chatInput: "where am I" },
        AUTH,
      );
      const text = await response.text();
      if (response.status === 403) return { refused: "workspace" };
      assert.equal(response.status, 200, text);
      return { reply: text };
    }, /try-read where.txt: ok in-allowed/);
  } finally {
    await swapper.stop();
    await serve.stop();
  }
});

Deno.test("a session-cwd link swapped while runs start never moves the session out of the workspace", async () => {
  const world = raceWorld();
  const sessionLink = join(world.allowed, "here");
  const serve = await startServe({
    dataDir: world.dataDir,
    args: [
      ...serveArgs(world, [
        "--terminal",
        JSON.stringify({ command: "cat", args: ["where.txt"] }),
      ]),
      ...["--client-terminals", "true"],
    ],
  });
  const swapper = await startSwapper(sessionLink, [
    join(world.allowed, "sub"),
    world.outside,
    world.dataDir,
  ]);
  try {
    // A terminal without a cwd runs in the session's cwd.
    await raceRuns(
      () => postRun(serve, { "session-cwd": sessionLink }),
      /in-sub/,
    );
  } finally {
    await swapper.stop();
    await serve.stop();
  }
});

Deno.test("a hub's cwd link swapped while jobs start never moves a daemon's agent out of its roots", async () => {
  const world = raceWorld();
  const runner = createDaemonJobRunner({
    environment: {
      HOME: tempDir("race-home-"),
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    },
    floor: daemonFloorFromFlags(
      { "workspace-roots": world.roots },
      world.dataDir,
    ),
  });
  const swapper = await startSwapper(world.link, [
    world.allowed,
    world.outside,
    world.dataDir,
  ]);
  let jobs = 0;
  try {
    await raceRuns(async () => {
      const events: JsonObject[] = [];
      const job = hubJob(`race-${++jobs}`, {
        run_id: `race-${jobs}`,
        prompt_text: "where am I",
        config: {
          provider: "custom",
          acp_command: agentCommand(["--try-read", "where.txt"]),
          cwd: world.link,
          langbot_assets_enabled: false,
        },
      }, (event) => events.push(event));
      await runner.runJob(job);
      const last = events.at(-1);
      const wire = JSON.stringify(events);
      if (last?.type === "run.failed") {
        const data = last.data as JsonObject;
        assert.equal(data.code, "http.forbidden", wire);
        return { refused: String(data.error).split(":")[0] };
      }
      assert.equal(last?.type, "run.completed", wire);
      return { reply: wire };
    }, /try-read where.txt: ok in-allowed/);
  } finally {
    await swapper.stop();
  }
});
