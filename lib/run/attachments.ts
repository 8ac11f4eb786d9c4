/**
 * Attachment bytes: decoding inline content (base64 or a `data:` URL) within a
 * size limit, and working out its MIME type (declared, sniffed from the bytes,
 * from the file name, or a fallback by kind).
 *
 * @module
 */

import { RunnerError } from "../errors.ts";

/** How an attachment is treated: as an image, audio, or any other file. */
export type AttachmentKind = "image" | "audio" | "file";

/** Decoded inline attachment content. */
export interface InlineContent {
  /** The MIME type a data URL declares. */
  mimeType?: string;
  /** Normalised base64 of `bytes`. */
  base64: string;
  /** The decoded bytes. */
  bytes: Uint8Array;
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

/** Whether `value` is a `data:` URL. */
export function isDataUrl(value: string): boolean {
  return /^data:/i.test(value.trimStart());
}

/** `type/subtype` in lower case, without parameters; undefined when empty. */
export function essence(mimeType: string | undefined): string | undefined {
  const mime = mimeType?.split(";")[0].trim().toLowerCase();
  return mime ? mime : undefined;
}

/**
 * Decodes an attachment's inline `source` (base64 or a `data:` URL).
 *
 * Throws `prompt.attachment_invalid` for anything else and
 * `prompt.attachment_too_large` when the bytes exceed `maxBytes`.
 */
export function decodeInline(
  source: string,
  options: { name: string; maxBytes: number },
): InlineContent {
  const { name, maxBytes } = options;
  const invalid = () =>
    new RunnerError(
      "prompt.attachment_invalid",
      `Attachment "${name}" has content that is neither valid base64 nor a data: URL. Send its bytes base64-encoded, or as a data: URL.`,
      { detail: { attachment: name } },
    );
  const tooLarge = (bytes: number) =>
    attachmentTooLargeError({
      name,
      bytes,
      limit: maxBytes,
      scope: "attachment",
    });

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

/** `bytes` as UTF-8 text; undefined when they are not valid UTF-8. */
export function utf8Text(bytes: Uint8Array): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}

/** The MIME type of well-known image, audio and PDF signatures in `bytes`. */
export function sniffMimeType(bytes: Uint8Array): string | undefined {
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

/** The MIME type of a file name's extension, for the common ones. */
export function mimeTypeFromExtension(name: string): string | undefined {
  const extension = name.toLowerCase().match(/\.([a-z0-9]+)$/)?.[1];
  return extension ? MIME_BY_EXTENSION[extension] : undefined;
}

/** The MIME type of bytes with no declared, sniffed or extension type. */
export function fallbackMimeType(
  kind: AttachmentKind,
  bytes: Uint8Array,
): string {
  const text = kind === "file" ? utf8Text(bytes) : undefined;
  // Undeclared readable text is far more useful to an agent as text than as a blob.
  // deno-lint-ignore no-control-regex
  if (text !== undefined && !/[\x00-\x08\x0b\x0e-\x1f\x7f]/.test(text)) {
    return "text/plain";
  }
  return DEFAULT_MIME_BY_KIND[kind];
}

/** The `prompt.attachment_too_large` error for one attachment or a prompt's total. */
export function attachmentTooLargeError(
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
