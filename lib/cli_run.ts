/**
 * `runner run <provider> "prompt"`: one local run from the command line,
 * agent text streamed to stdout, progress on stderr, or one event per line
 * with `--json`. Exit code: 0 completed, 1 failed, 130 cancelled, 2 bad input.
 *
 * @module
 */

import { createAssetsHook } from "./assets_wiring.ts";
import { basename, extname, join } from "node:path";
import { parseArgs } from "node:util";
import {
  configFlagOptions,
  configFromFlags,
  reportFailure,
} from "./cli_args.ts";
import { parseRunConfig } from "./config.ts";
import { RunnerError } from "./errors.ts";
import type { RunEvent } from "./events.ts";
import type { Attachment } from "./prompt.ts";
import { createReaperRegistry, reapLeftoverGroups } from "./reaper.ts";
import { createRunManager } from "./run_manager.ts";
import { defaultDataDir, openStore } from "./store.ts";

/** Help text of `runner run`. */
export const RUN_HELP = `Usage: runner run <provider> [options] "prompt"

Runs one prompt with an ACP agent on this machine and streams its answer.

Options:
  --workspace DIR        the agent's working directory (absolute; created if missing)
  --acp-command CMD      the agent command (required for provider=custom)
  --env-json JSON        extra environment for the agent, e.g. '{"API_KEY":"…"}'
  --conversation ID      keep the agent's session across invocations
  --attach PATH|URL      attach a file or URL (repeatable)
  --reuse-session BOOL   reuse the stored session (default true)
  --json                 print one run event per line (JSON)
  --data-dir DIR         where the store lives (default: the user data dir)
  --<config-key> VALUE   any run config key, e.g. --timeout 300 (see docs/config.md)
`;

const MIME_BY_EXTENSION: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
  ".wav": "audio/wav",
  ".mp3": "audio/mpeg",
  ".pdf": "application/pdf",
  ".txt": "text/plain",
  ".md": "text/markdown",
  ".json": "application/json",
};

async function attachmentFrom(spec: string): Promise<Attachment> {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(spec)) {
    return {
      url: spec,
      name: basename(new URL(spec).pathname) || "attachment",
    };
  }
  let bytes: Uint8Array;
  try {
    bytes = await Deno.readFile(spec);
  } catch (error) {
    throw new RunnerError(
      "prompt.attachment_invalid",
      `--attach ${spec}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
  const mime = MIME_BY_EXTENSION[extname(spec).toLowerCase()];
  const type = mime?.startsWith("image/")
    ? "image"
    : mime?.startsWith("audio/")
    ? "audio"
    : "file";
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return { type, name: basename(spec), mime_type: mime, content: btoa(binary) };
}

/** Runs `runner run`; returns the exit code. */
export async function runCommand(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        ...configFlagOptions(),
        conversation: { type: "string" },
        attach: { type: "string", multiple: true },
        json: { type: "boolean" },
        "data-dir": { type: "string" },
        "run-id": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    console.error(
      `${error instanceof Error ? error.message : error}\n\n${RUN_HELP}`,
    );
    return 2;
  }
  const { positionals } = parsed;
  const values = parsed.values as
    & typeof parsed.values
    & Record<string, string | undefined>;
  if (values.help) {
    console.log(RUN_HELP);
    return 0;
  }
  const [provider, ...words] = positionals;
  const text = words.join(" ");
  let config;
  const attachments: Attachment[] = [];
  try {
    config = parseRunConfig({
      ...configFromFlags(values),
      provider: provider ?? values.provider,
      workspace: values.workspace ?? Deno.cwd(),
    });
    for (const spec of values.attach ?? []) {
      attachments.push(await attachmentFrom(spec));
    }
    if (!text && !attachments.length) {
      throw new RunnerError(
        "config.invalid",
        'Give a prompt: runner run <provider> "prompt".',
      );
    }
  } catch (error) {
    return reportFailure(error);
  }
  const dataDir = values["data-dir"] ?? defaultDataDir();
  await reapLeftoverGroups(join(dataDir, "agents"));
  const store = openStore({ dataDir });
  const assets = createAssetsHook({ log: () => {} });
  const manager = createRunManager({
    assets,
    store,
    registry: createReaperRegistry(join(dataDir, "agents")),
  });
  const json = Boolean(values.json);
  const encoder = new TextEncoder();
  let lastText = false;
  let result: string | undefined;
  const print = (event: RunEvent) => {
    if (json) {
      Deno.stdout.writeSync(encoder.encode(JSON.stringify(event) + "\n"));
      return;
    }
    printHuman(event, (wrote) => lastText = wrote, () => lastText);
  };
  let stopSignal: (() => void) | undefined;
  try {
    const outcome = manager.start({
      runId: values["run-id"],
      conversationId: values.conversation,
      input: { text, attachments },
      config,
    });
    const run = outcome.run;
    run.subscribe(print);
    stopSignal = () => run.handle.cancel();
    Deno.addSignalListener("SIGINT", stopSignal);
    Deno.addSignalListener("SIGTERM", stopSignal);
    result = (await run.done).status;
  } catch (error) {
    await assets.close();
    store.close();
    return reportFailure(error);
  } finally {
    if (stopSignal) {
      Deno.removeSignalListener("SIGINT", stopSignal);
      Deno.removeSignalListener("SIGTERM", stopSignal);
    }
  }
  await assets.close();
  store.close();
  return result === "completed" ? 0 : result === "cancelled" ? 130 : 1;
}

function printHuman(
  event: RunEvent,
  setText: (wrote: boolean) => void,
  wroteText: () => boolean,
) {
  const write = (stream: typeof Deno.stdout, text: string) =>
    stream.writeSync(new TextEncoder().encode(text));
  const data = event.data as Record<string, unknown>;
  switch (event.type) {
    case "message.delta":
      write(
        Deno.stdout,
        String((data.chunk as { content?: string }).content ?? ""),
      );
      setText(true);
      return;
    case "message.completed":
      if (!wroteText()) {
        write(
          Deno.stdout,
          String((data.message as { content?: string }).content ?? ""),
        );
      }
      write(Deno.stdout, "\n");
      setText(false);
      return;
    case "tool.call.started":
      write(Deno.stderr, `[tool] ${data.tool_name}\n`);
      return;
    case "tool.call.completed":
      write(
        Deno.stderr,
        `[tool ${data.error ? "failed" : "done"}] ${data.tool_name}\n`,
      );
      return;
    case "plan.updated":
      write(
        Deno.stderr,
        `[plan] ${
          (data.entries as Array<{ content?: string; status?: string }>)
            .map((entry) => `${entry.status ?? ""}: ${entry.content ?? ""}`)
            .join("; ")
        }\n`,
      );
      return;
    case "permission.decided":
      write(
        Deno.stderr,
        `[permission] ${data.title ?? "request"}: ${
          data.option_id ?? data.outcome
        }\n`,
      );
      return;
    case "run.failed":
      write(Deno.stderr, `error [${data.code}]: ${data.error}\n`);
      return;
  }
}
