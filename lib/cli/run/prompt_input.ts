/**
 * Where `runner run` takes its prompt from: the words after the provider,
 * standard input (`-`, or a pipe when no words are given), or a file
 * (`--prompt-file`); and its attachments, each `--attach` a file (sent
 * inline) or a URL.
 *
 * @module
 */

import { basename, extname } from "node:path";
import { RunnerError } from "../../errors.ts";
import type { Attachment } from "../../run/prompt.ts";

/** What the command line says about the prompt. */
export interface PromptSources {
  /** The words after the provider. */
  words: string[];
  /** `--prompt-file`, when given. */
  promptFile?: string;
  /** Whether files or URLs are attached (then a silent stdin is not read). */
  hasAttachments: boolean;
  /** Whether standard input is a terminal (default: asks Deno). */
  stdinIsTerminal?: boolean;
  /** Reads all of standard input (default: Deno.stdin). */
  readStdin?: () => Promise<string>;
}

function readAllStdin(): Promise<string> {
  return new Response(Deno.stdin.readable).text();
}

/**
 * The prompt text: the words joined; all of stdin for `-`, or when stdin is
 * not a terminal and neither words, a file nor attachments are given; the
 * file's text for `--prompt-file`. Trailing whitespace is dropped.
 *
 * @throws {RunnerError} `config.invalid` when the prompt is given twice or the
 * file cannot be read.
 */
export async function readPromptText(sources: PromptSources): Promise<string> {
  const { words, promptFile } = sources;
  const fromStdin = words.length === 1 && words[0] === "-";
  if (promptFile !== undefined && words.length) {
    throw new RunnerError(
      "config.invalid",
      "Give the prompt once: as words, as - (standard input) or with --prompt-file.",
    );
  }
  const stdin = sources.readStdin ?? readAllStdin;
  if (fromStdin) return (await stdin()).trimEnd();
  if (promptFile !== undefined) return (await readFile(promptFile)).trimEnd();
  const isTerminal = sources.stdinIsTerminal ?? Deno.stdin.isTerminal();
  if (!words.length && !sources.hasAttachments && !isTerminal) {
    return (await stdin()).trimEnd();
  }
  return words.join(" ");
}

async function readFile(path: string): Promise<string> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      `--prompt-file ${path}: cannot read the file (${
        error instanceof Error ? error.message : error
      }).`,
    );
  }
}

/** The MIME types of the file names `--attach` recognises. */
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

/** The attachment one `--attach PATH|URL` names; throws `prompt.attachment_invalid` for a file it cannot read. */
export async function attachmentFrom(spec: string): Promise<Attachment> {
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
