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
import { RunnerError } from "./errors.ts";

/** One LangBot attachment: inline bytes (`content`) or a link (`url`). */
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

/** How an attachment is treated: as an image, audio, or any other file. */
export type AttachmentKind = "image" | "audio" | "file";

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
  if (text === undefined && attachments.length === 0) {
    throw new RunnerError(
      "config.invalid",
      "input needs text or at least one attachment",
    );
  }

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
        throw tooLargeError({
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

/** The text of every `text` block in `blocks`, joined by newlines (for logs). */
export function promptText(blocks: readonly ContentBlock[]): string {
  return blocks
    .flatMap((block) => block.type === "text" ? [block.text] : [])
    .join("\n");
}

/** An attachment's kind: its `type` when known, else from its MIME type, else `file`. */
export function attachmentKind(
  type: string | undefined,
  mimeType: string | undefined,
): AttachmentKind {
  if (type === "image" || type === "audio" || type === "file") return type;
  const mime = mimeType?.toLowerCase() ?? "";
  if (mime.startsWith("image/")) return "image";
  if (mime.startsWith("audio/")) return "audio";
  return "file";
}

/** Whether `mimeType` names text the agent can read as an embedded `text` resource. */
export function isTextualMimeType(mimeType: string): boolean {
  const mime = essence(mimeType) ?? "";
  if (mime.startsWith("text/")) return true;
  if (!mime.startsWith("application/")) return false;
  const subtype = mime.slice("application/".length);
  return TEXTUAL_APPLICATION_SUBTYPES.has(subtype) ||
    /\+(json|xml|yaml)$/.test(subtype);
}

const TEXTUAL_APPLICATION_SUBTYPES = new Set(
  ("json ndjson x-ndjson xml yaml x-yaml toml x-toml javascript x-javascript " +
    "ecmascript typescript x-typescript x-sh x-shellscript sql graphql " +
    "x-python x-ruby x-perl x-php x-httpd-php x-tex x-latex csv").split(" "),
);

const DEFAULT_MIME_BY_KIND: Record<AttachmentKind, string> = {
  image: "image/png",
  audio: "audio/wav",
  file: "application/octet-stream",
};

const MIME_BY_EXTENSION: Record<string, string> = Object.fromEntries(
  ("png:image/png jpg:image/jpeg jpeg:image/jpeg gif:image/gif " +
    "webp:image/webp mp3:audio/mpeg wav:audio/wav ogg:audio/ogg " +
    "pdf:application/pdf txt:text/plain md:text/markdown csv:text/csv " +
    "html:text/html json:application/json yaml:application/yaml " +
    "yml:application/yaml xml:application/xml").split(" ").map((pair) =>
      pair.split(":")
    ),
);

const ATTACHMENT_FIELDS = [
  "type",
  "mime_type",
  "name",
  "url",
  "content",
] as const;

type Mapped = { block: ContentBlock; bytes: number } | { note: string };

interface Inline {
  /** The MIME type a data URL declares. */
  mimeType?: string;
  /** Normalised base64 of `bytes`. */
  base64: string;
  bytes: Uint8Array;
}

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
  const inlineSource = attachment.content ||
    (attachment.url && isDataUrl(attachment.url) ? attachment.url : undefined);
  const linkOrNote = (mimeType: string | undefined, reason: string): Mapped => {
    if (link && URL.canParse(link)) {
      return {
        block: resourceLink(link, name, essence(attachment.mime_type)),
        bytes: 0,
      };
    }
    return { note: notSent(name, mimeType, reason) };
  };

  if (!inlineSource) {
    return linkOrNote(
      essence(attachment.mime_type),
      link
        ? "its URL is not a valid absolute URL"
        : "it has neither content nor a URL",
    );
  }
  const inline = decodeInline(inlineSource, name, limits.maxAttachmentBytes);
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
  const uri = `attachment:///${encodeURIComponent(name)}`;
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
): ContentBlock {
  return mimeType === undefined
    ? { type: "resource_link", uri, name }
    : { type: "resource_link", uri, name, mimeType };
}

function notSent(
  name: string,
  mimeType: string | undefined,
  reason: string,
): string {
  const mime = mimeType ? ` (${mimeType})` : "";
  return `[Attachment not sent: ${name}${mime} — ${reason}.]`;
}

function displayName(attachment: Attachment): string {
  const raw = attachment.name?.trim() || lastPathSegment(attachment.url) ||
    "attachment";
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

function isDataUrl(value: string): boolean {
  return /^data:/i.test(value.trimStart());
}

/** `type/subtype` in lower case, without parameters; undefined when empty. */
function essence(mimeType: string | undefined): string | undefined {
  const mime = mimeType?.split(";")[0].trim().toLowerCase();
  return mime ? mime : undefined;
}

function decodeInline(source: string, name: string, maxBytes: number): Inline {
  const invalid = () =>
    new RunnerError(
      "prompt.attachment_invalid",
      `Attachment "${name}" has content that is neither valid base64 nor a data: URL. Send its bytes base64-encoded, or as a data: URL.`,
      { detail: { attachment: name } },
    );
  const tooLarge = (bytes: number) =>
    tooLargeError({ name, bytes, limit: maxBytes, scope: "attachment" });

  let payload = source.trim();
  let mimeType: string | undefined;
  if (isDataUrl(payload)) {
    const comma = payload.indexOf(",");
    if (comma < 0) throw invalid();
    const params = payload.slice("data:".length, comma).split(";");
    mimeType = params[0].includes("/") ? essence(params[0]) : undefined;
    payload = payload.slice(comma + 1);
    if (params.at(-1)?.trim().toLowerCase() !== "base64") {
      const bytes = percentDecode(payload);
      if (bytes === undefined) throw invalid();
      if (bytes.length > maxBytes) throw tooLarge(bytes.length);
      return { mimeType, base64: bytes.toBase64(), bytes };
    }
  }
  const base64 = normaliseBase64(payload);
  if (base64 === undefined) throw invalid();
  const estimate = Math.floor(base64.replace(/=+$/, "").length * 3 / 4);
  if (estimate > maxBytes) throw tooLarge(estimate);
  try {
    return { mimeType, base64, bytes: Uint8Array.fromBase64(base64) };
  } catch {
    throw invalid();
  }
}

/** Standard, padded base64 (URL-safe letters and whitespace accepted); undefined if invalid. */
function normaliseBase64(text: string): string | undefined {
  const compact = text.replace(/\s+/g, "").replace(/-/g, "+").replace(/_/g, "/")
    .replace(/={1,2}$/, "");
  if (!/^[A-Za-z0-9+/]*$/.test(compact) || compact.length % 4 === 1) {
    return undefined;
  }
  return compact.padEnd(Math.ceil(compact.length / 4) * 4, "=");
}

function percentDecode(text: string): Uint8Array | undefined {
  try {
    return new TextEncoder().encode(decodeURIComponent(text));
  } catch {
    return undefined;
  }
}

function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

function sniffMimeType(bytes: Uint8Array): string | undefined {
  const starts = (...prefix: number[]) =>
    prefix.every((byte, i) => bytes[i] === byte);
  const ascii = (from: number, to: number) =>
    String.fromCharCode(...bytes.subarray(from, to));
  if (starts(0x89, 0x50, 0x4e, 0x47)) return "image/png";
  if (starts(0xff, 0xd8, 0xff)) return "image/jpeg";
  if (ascii(0, 4) === "GIF8") return "image/gif";
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WEBP") return "image/webp";
  if (ascii(0, 4) === "RIFF" && ascii(8, 12) === "WAVE") return "audio/wav";
  if (ascii(0, 5) === "%PDF-") return "application/pdf";
  return undefined;
}

function mimeTypeFromExtension(name: string): string | undefined {
  const extension = name.toLowerCase().match(/\.([a-z0-9]+)$/)?.[1];
  return extension ? MIME_BY_EXTENSION[extension] : undefined;
}

/** The MIME type of bytes with no declared, sniffed or extension type. */
function fallbackMimeType(kind: AttachmentKind, bytes: Uint8Array): string {
  const text = kind === "file" ? utf8Text(bytes) : undefined;
  // Undeclared readable text is far more useful to an agent as text than as a blob.
  // deno-lint-ignore no-control-regex
  if (text !== undefined && !/[\x00-\x08\x0b\x0e-\x1f\x7f]/.test(text)) {
    return "text/plain";
  }
  return DEFAULT_MIME_BY_KIND[kind];
}

function tooLargeError(
  options: {
    name: string;
    bytes: number;
    limit: number;
    scope: "attachment" | "prompt";
  },
): RunnerError {
  const { name, bytes, limit } = options;
  let [size, limitSize] = [formatBytes(bytes), formatBytes(limit)];
  if (size === limitSize) {
    [size, limitSize] = [`${bytes} bytes`, `${limit} bytes`];
  }
  const message = options.scope === "attachment"
    ? `Attachment "${name}" is ${size} after decoding; the limit is ${limitSize} per attachment. Send a smaller file, or a URL instead.`
    : `The prompt's attachments reach ${size} after decoding at "${name}"; the limit is ${limitSize} per prompt. Send fewer or smaller attachments, or URLs instead.`;
  return new RunnerError("prompt.attachment_too_large", message, {
    detail: { attachment: name, bytes, limit_bytes: limit },
  });
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  const [size, unit] = bytes < 1024 * 1024
    ? [1024, "KiB"]
    : [1024 * 1024, "MiB"];
  return `${Number((bytes / size).toFixed(1))} ${unit}`;
}
