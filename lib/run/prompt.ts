/**
 * Multimodal run input → ACP `session/prompt` content blocks, gated by the
 * agent's advertised `promptCapabilities`. Attachments the agent cannot take
 * are never dropped silently: each becomes a short note appended to the
 * prompt text.
 *
 * @module
 */

import type {
  ContentBlock,
  PromptCapabilities,
} from "@agentclientprotocol/sdk";
import {
  attachmentKind,
  attachmentTooLargeError,
  decodeInline,
  essence,
  fallbackMimeType,
  isDataUrl,
  isTextualMimeType,
  mimeTypeFromExtension,
  sniffMimeType,
  utf8Text,
} from "./attachments.ts";
import { RunnerError } from "../errors.ts";

/**
 * One LangBot attachment: inline bytes (`content`) or a link (`url`, or a
 * `path` on the agent's machine).
 */
export interface Attachment {
  /** `image`, `file` or `audio`; anything else is classified by MIME type. */
  type?: "image" | "file" | "audio" | string;
  /** Declared MIME type. */
  mime_type?: string;
  /** File name shown to the agent and in notes. */
  name?: string;
  /** Where the agent can fetch the attachment (a `data:` URL counts as inline). */
  url?: string;
  /** Inline bytes: base64, or a `data:` URL. */
  content?: string;
  /** A file path on the agent's machine, linked as it is when there is no URL. */
  path?: string;
  /** Size in bytes, passed on in the `resource_link`. */
  size?: number;
}

/** The user's input for one run or follow-up turn. */
export interface RunInput {
  /** The message text. */
  text?: string;
  /** Attachments, in order. */
  attachments?: Attachment[];
}

/** Size limits on decoded attachment bytes. */
export interface PromptLimits {
  /** Largest decoded attachment, in bytes. */
  maxAttachmentBytes?: number;
  /** Largest total of decoded attachment bytes sent in one prompt. */
  maxPromptBytes?: number;
}

/** Limits used when {@linkcode BuildPromptOptions.limits} leaves one out. */
export const DEFAULT_PROMPT_LIMITS: Readonly<Required<PromptLimits>> = {
  maxAttachmentBytes: 10 * 1024 * 1024,
  maxPromptBytes: 25 * 1024 * 1024,
};

/** Options for {@linkcode buildPrompt}. */
export interface BuildPromptOptions {
  /** The user's input. */
  input: RunInput;
  /** The agent's `agentCapabilities.promptCapabilities` (absent: text and links only). */
  capabilities: PromptCapabilities | undefined;
  /** Size limits; each defaults to {@linkcode DEFAULT_PROMPT_LIMITS}. */
  limits?: PromptLimits;
  /** A paragraph placed before the user's text (e.g. a run-scope note). */
  prefixText?: string;
  /** A follow-up turn: text only, attachments are named in a note instead. */
  followUp?: boolean;
}

/** The prompt for `session/prompt`, and the notes about what was not sent. */
export interface BuiltPrompt {
  /** Content blocks; the text block, when any, comes first. */
  blocks: ContentBlock[];
  /** One line per attachment not sent (also appended to the prompt text). */
  notes: string[];
}

/**
 * Maps `input` to ACP prompt content blocks the agent accepts.
 *
 * Throws `config.invalid` for an input with neither text nor attachments,
 * `prompt.attachment_invalid` for content that is not base64 or a data URL,
 * and `prompt.attachment_too_large` when a limit is exceeded.
 */
export function buildPrompt(options: BuildPromptOptions): BuiltPrompt {
  const { input, capabilities = {}, followUp = false } = options;
  const limits = {
    maxAttachmentBytes: options.limits?.maxAttachmentBytes ??
      DEFAULT_PROMPT_LIMITS.maxAttachmentBytes,
    maxPromptBytes: options.limits?.maxPromptBytes ??
      DEFAULT_PROMPT_LIMITS.maxPromptBytes,
  };
  const { text, attachments } = checkInput(input);
  if (text === undefined && attachments.length === 0) throw emptyInputError();

  const notes: string[] = [];
  const attachmentBlocks: ContentBlock[] = [];
  if (followUp) {
    if (attachments.length > 0) {
      const names = attachments.map(displayName).join(", ");
      notes.push(
        `[Attachments on follow-up messages are not forwarded: ${names}]`,
      );
    }
  } else {
    let totalBytes = 0;
    for (const attachment of attachments) {
      const mapped = mapAttachment(attachment, capabilities, limits);
      if ("note" in mapped) {
        notes.push(mapped.note);
        continue;
      }
      totalBytes += mapped.bytes;
      if (totalBytes > limits.maxPromptBytes) {
        throw attachmentTooLargeError({
          name: displayName(attachment),
          bytes: totalBytes,
          limit: limits.maxPromptBytes,
          scope: "prompt",
        });
      }
      attachmentBlocks.push(mapped.block);
    }
  }

  const paragraphs = [options.prefixText, text, notes.join("\n")].filter(
    (paragraph): paragraph is string =>
      paragraph !== undefined && paragraph.trim() !== "",
  );
  if (paragraphs.length === 0) return { blocks: attachmentBlocks, notes };
  const textBlock: ContentBlock = {
    type: "text",
    text: paragraphs.join("\n\n"),
  };
  return { blocks: [textBlock, ...attachmentBlocks], notes };
}

/**
 * Checks a run's first input (decoding, size limits in MiB) before anything
 * starts, as if the agent accepted every kind; throws {@linkcode buildPrompt}'s
 * errors.
 */
export function checkRunInput(
  input: RunInput,
  limits: { maxAttachmentMb: number; maxPromptMb: number },
): void {
  buildPrompt({
    input,
    capabilities: { image: true, audio: true, embeddedContext: true },
    limits: {
      maxAttachmentBytes: limits.maxAttachmentMb * 1024 * 1024,
      maxPromptBytes: limits.maxPromptMb * 1024 * 1024,
    },
  });
}

/** Whether `input` has neither text (beyond whitespace) nor an attachment. */
export function isEmptyInput(input: RunInput): boolean {
  const text = typeof input?.text === "string" ? input.text.trim() : "";
  return !text && !(Array.isArray(input?.attachments) &&
    input.attachments.length);
}

/**
 * The `config.invalid` error of an input with neither text nor attachments;
 * `detail.input` is `"empty"` (the relay reports it as daemon.py's
 * `acp.daemon_empty_prompt`).
 */
export function emptyInputError(): RunnerError {
  return new RunnerError(
    "config.invalid",
    "input needs text or at least one attachment",
    { detail: { input: "empty" } },
  );
}

/** The text of every `text` block in `blocks`, joined by newlines (for logs). */
export function promptText(blocks: readonly ContentBlock[]): string {
  return blocks
    .flatMap((block) => block.type === "text" ? [block.text] : [])
    .join("\n");
}

const ATTACHMENT_FIELDS = [
  "type",
  "mime_type",
  "name",
  "url",
  "content",
  "path",
] as const;

type Mapped = { block: ContentBlock; bytes: number } | { note: string };

function checkInput(
  input: RunInput,
): { text: string | undefined; attachments: Attachment[] } {
  if (typeof input !== "object" || input === null) {
    throw new RunnerError(
      "config.invalid",
      "input must be an object with text and/or attachments",
    );
  }
  if (input.text !== undefined && typeof input.text !== "string") {
    throw new RunnerError("config.invalid", "input.text must be a string");
  }
  const attachments = input.attachments ?? [];
  if (!Array.isArray(attachments)) {
    throw new RunnerError("config.invalid", "input.attachments must be a list");
  }
  for (const [index, attachment] of attachments.entries()) {
    const bad = typeof attachment !== "object" || attachment === null
      ? ""
      : ATTACHMENT_FIELDS.find((field) =>
        attachment[field] != null && typeof attachment[field] !== "string"
      );
    if (bad !== undefined) {
      const what = bad ? `.${bad} must be a string` : " must be an object";
      throw new RunnerError(
        "config.invalid",
        `input.attachments[${index}]${what}`,
      );
    }
    if (attachment.size != null && !Number.isSafeInteger(attachment.size)) {
      throw new RunnerError(
        "config.invalid",
        `input.attachments[${index}].size must be a whole number of bytes`,
      );
    }
  }
  const text = input.text?.trim() ? input.text : undefined;
  return { text, attachments };
}

function mapAttachment(
  attachment: Attachment,
  capabilities: PromptCapabilities,
  limits: Required<PromptLimits>,
): Mapped {
  const name = displayName(attachment);
  const link = attachment.url && !isDataUrl(attachment.url)
    ? attachment.url
    : undefined;
  // Like daemon.py: a path on the agent's machine is linked as it is.
  const linkUri = link && URL.canParse(link) ? link : attachment.path?.trim();
  const inlineSource = attachment.content ||
    (attachment.url && isDataUrl(attachment.url) ? attachment.url : undefined);
  const linkOrNote = (mimeType: string | undefined, reason: string): Mapped => {
    if (linkUri) {
      const mime = essence(attachment.mime_type);
      const block = resourceLink(linkUri, name, mime, attachment.size);
      return { block, bytes: 0 };
    }
    return { note: notSent(name, mimeType, reason) };
  };

  if (!inlineSource) {
    return linkOrNote(
      essence(attachment.mime_type),
      link
        ? "its URL is not a valid absolute URL"
        : "it has neither content nor a URL or path",
    );
  }
  const inline = decodeInline(inlineSource, {
    name,
    maxBytes: limits.maxAttachmentBytes,
  });
  const known = inline.mimeType ?? essence(attachment.mime_type) ??
    sniffMimeType(inline.bytes) ?? mimeTypeFromExtension(name);
  const kind = attachmentKind(attachment.type, known);
  const mimeType = known ?? fallbackMimeType(kind, inline.bytes);
  const sent = { bytes: inline.bytes.length };

  if (kind === "image") {
    if (!capabilities.image) {
      return linkOrNote(mimeType, "this agent does not accept inline images");
    }
    return { block: { type: "image", data: inline.base64, mimeType }, ...sent };
  }
  if (kind === "audio") {
    if (!capabilities.audio) {
      return linkOrNote(mimeType, "this agent does not accept inline audio");
    }
    return { block: { type: "audio", data: inline.base64, mimeType }, ...sent };
  }
  if (!capabilities.embeddedContext) {
    return linkOrNote(mimeType, "this agent does not accept embedded files");
  }
  const uri = linkUri ?? `attachment:///${encodeURIComponent(name)}`;
  const text = isTextualMimeType(mimeType) ? utf8Text(inline.bytes) : undefined;
  const resource = text === undefined
    ? { uri, mimeType, blob: inline.base64 }
    : { uri, mimeType, text };
  return { block: { type: "resource", resource }, ...sent };
}

function resourceLink(
  uri: string,
  name: string,
  mimeType: string | undefined,
  size: number | undefined,
): ContentBlock {
  return {
    type: "resource_link",
    uri,
    name,
    ...(mimeType === undefined ? {} : { mimeType }),
    ...(size == null ? {} : { size }),
  };
}

function notSent(
  name: string,
  mimeType: string | undefined,
  reason: string,
): string {
  const mime = mimeType ? ` (${mimeType})` : "";
  return `[Attachment not sent: ${name}${mime} — ${reason}.]`;
}

/** The name an attachment is shown by: its own, its URL's or path's last segment, or "attachment". */
export function displayName(attachment: Attachment): string {
  const raw = attachment.name?.trim() || lastPathSegment(attachment.url) ||
    attachment.path?.split(/[\\/]/).filter(Boolean).at(-1) || "attachment";
  return raw.replace(/[\r\n\t]+/g, " ");
}

function lastPathSegment(url: string | undefined): string | undefined {
  if (!url || isDataUrl(url) || !URL.canParse(url)) return undefined;
  const segment = new URL(url).pathname.split("/").filter(Boolean).at(-1);
  if (!segment) return undefined;
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}
