/**
 * The entrances an attacker's run comes through besides `runner run`: a real
 * `runner serve` (the caller holds its API token and sends the attacker
 * fixture as its `acp-command`) and a real `runner daemon` job (the same
 * caller on a `runner serve --daemon-enabled` hub, `location=daemon`). The
 * operator's flags are each test's; what the attacker reported is read from
 * the reply the same way on every entrance.
 *
 * @module
 */

import { quoteCommand } from "../../lib/agent/shell_words.ts";
import type { RunEvent } from "../../lib/events.ts";
import { serveWithDaemon } from "../daemon_test_helpers.ts";
import { tempDir } from "../helpers.ts";
import { confinedFixtureCommand } from "../sandbox_helpers.ts";
import {
  postJson,
  type ServeProcess,
  sseEvents,
  startServe,
} from "../serve_test_helpers.ts";

/** The API token every attacked `runner serve` (and hub) is started with. */
export const API_TOKEN = `security-entrance-${crypto.randomUUID()}`;

/** The fixture agent with `flags` (they may hold spaces and JSON), runnable confined or not. */
export function attackerCommand(...flags: string[]): string {
  return quoteCommand([...confinedFixtureCommand().split(" "), ...flags]);
}

/** Options for {@linkcode attackServe}. */
export interface AttackServeOptions {
  /** The operator's flags (`--sandbox confined`, `--workspace-roots …`). */
  args: string[];
  /** The runner's environment over the test's (`HOME`, `PATH`, `DENO_DIR`). */
  environment?: Record<string, string>;
  /** The data dir (default: a fresh one). */
  dataDir?: string;
  /** A command the server runs under (`setpriv …` for another user). */
  wrapper?: string[];
}

/** A real `runner serve` with {@linkcode API_TOKEN}, custom commands allowed and no assets endpoint. */
export function attackServe(
  options: AttackServeOptions,
): Promise<ServeProcess> {
  return startServe({
    dataDir: options.dataDir ?? tempDir("attack-serve-data-"),
    args: [
      ...["--api-token", API_TOKEN, "--allow-custom-commands"],
      ...["--langbot-assets-enabled", "false"],
      ...options.args,
    ],
    env: options.environment,
    wrapper: options.wrapper,
  });
}

/**
 * A caller's run (`POST /v1/runs` with the token, `config` over no assets,
 * `request` for the body's other fields such as `conversation_id`); every
 * event of its stream.
 */
export async function callerRun(
  serve: ServeProcess,
  config: Record<string, unknown>,
  request: Record<string, unknown> = {},
): Promise<RunEvent[]> {
  const response = await postJson(`${serve.url}/v1/runs`, {
    input: { text: "attack" },
    ...request,
    config: { "langbot-assets-enabled": false, ...config },
  }, { authorization: `Bearer ${API_TOKEN}` });
  if (response.status !== 200) {
    throw new Error(
      `POST /v1/runs: ${response.status} ${await response.text()}`,
    );
  }
  return await sseEvents(response);
}

/** Options for {@linkcode attackDaemon}. */
export interface AttackDaemonOptions {
  /** The hub operator's flags (`--fs-read true`, `--env-json …`). */
  hubArgs?: string[];
  /** The daemon operator's flags (`--sandbox confined`, `--workspace-roots …`). */
  daemonArgs: string[];
  /** The daemon's environment over the test's. */
  environment?: Record<string, string>;
}

/** A hub and a connected `runner daemon`, with a caller's runs through it. */
export interface AttackedDaemon {
  /** The hub (`runner serve --daemon-enabled`). */
  serve: ServeProcess;
  /** A caller's run on the daemon (`location=daemon`); every event of its stream. */
  run(config: Record<string, unknown>): Promise<RunEvent[]>;
  /** What the daemon logged so far. */
  logs(): string;
  /** Stops the daemon (`signal`, SIGTERM unless named), then the hub; the daemon's exit code. */
  stop(signal?: Deno.Signal): Promise<number>;
}

/**
 * A real `runner serve --daemon-enabled` hub with {@linkcode API_TOKEN} and an
 * explicit daemon token (on both sides), and a real `runner daemon`
 * connected to it.
 */
export async function attackDaemon(
  options: AttackDaemonOptions,
): Promise<AttackedDaemon> {
  const daemonId = `attacked-${crypto.randomUUID().slice(0, 8)}`;
  const { serve, daemon } = await serveWithDaemon(daemonId, {
    serveArgs: ["--api-token", API_TOKEN, ...(options.hubArgs ?? [])],
    daemonArgs: options.daemonArgs,
    daemonEnv: options.environment,
  });
  try {
    await daemon.connected;
  } catch (error) {
    await daemon.stop().catch(() => {});
    await serve.stop();
    throw error;
  }
  return {
    serve,
    run: (config) =>
      callerRun(serve, {
        location: "daemon",
        "daemon-id": daemonId,
        ...config,
      }),
    logs: daemon.logs,
    async stop(signal) {
      try {
        return await daemon.stop(signal);
      } finally {
        await serve.stop();
      }
    },
  };
}

/** The text of a run's completed messages, joined. */
export function replyOf(events: RunEvent[]): string {
  return events.filter((event) => event.type === "message.completed")
    .map((event) => (event.data.message as { content: string }).content)
    .join("\n");
}

/** The `attack-<what>: outcome` lines of a reply or an output, by `<what>`. */
export function attackLines(text: string): Record<string, string> {
  const lines: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const match = /^attack-([^:]+): (.*)$/.exec(line);
    if (match) lines[match[1]] = match[2];
  }
  return lines;
}

/** The fixture's `terminal N: {json}` reply lines, by N. */
export function terminalReports(text: string): Record<string, unknown>[] {
  const reports: Record<string, unknown>[] = [];
  for (const line of text.split("\n")) {
    const match = /^terminal (\d+): (.*)$/.exec(line);
    if (match) reports[Number(match[1])] = JSON.parse(match[2]);
  }
  return reports;
}
