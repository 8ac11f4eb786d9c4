/**
 * The LangBot input of a `run.start` payload (`prompt_text`, `input.text`,
 * `input.attachments`, `input.contents`) as a run input, mapped the way
 * `daemon.py` maps it: attachments when there are any, else the `contents`
 * elements (`image_base64`, `image_url`, `file_base64`, `file_url`) as
 * attachments; attachment names, MIME types and sizes from any of the field
 * spellings LangBot uses.
 *
 * @module
 */

import type { JsonObject } from "../relay.ts";
import type { Attachment, RunInput } from "../run/prompt.ts";
import { mimeTypeFromExtension } from "../run/attachments.ts";

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function text(value: unknown): string | undefined {
  if (typeof value !== "string") return undefined;
  return value.trim() === "" ? undefined : value;
}

/** The first of `keys` that holds a non-empty value, as text. */
function firstText(item: JsonObject, keys: string[]): string | undefined {
  for (const key of keys) {
    const value = item[key];
    if (typeof value === "number") return String(value);
    const found = text(value);
    if (found !== undefined) return found;
  }
  return undefined;
}

function sizeOf(item: JsonObject): number | undefined {
  const size = item.size ?? item.size_bytes;
  return Number.isSafeInteger(size) ? size as number : undefined;
}

/** One LangBot attachment object as a run attachment. */
function attachmentOf(item: JsonObject): Attachment {
  const attachment: Attachment = {
    type: text(item.type),
    mime_type: firstText(item, ["mime_type", "content_type"]),
    name: firstText(item, [
      "name",
      "file_name",
      "platform_attachment_id",
      "id",
    ]),
    url: text(item.url),
    content: text(item.content),
  };
  const path = text(item.path);
  if (path !== undefined) attachment.path = path;
  const size = sizeOf(item);
  if (size !== undefined) attachment.size = size;
  return attachment;
}

/** The URL of an `image_url` element (`{url}` or a plain string). */
function imageUrlOf(item: JsonObject): string | undefined {
  const value = item.image_url;
  return isObject(value) ? text(value.url) : text(value);
}

/** A guessed MIME type for a link, or `fallback` (as daemon.py does). */
function guessMime(name: string, fallback: string): string {
  return mimeTypeFromExtension(name.split(/[?#]/)[0]) ?? fallback;
}

/**
 * `input.contents` elements as attachments, like daemon.py's
 * `attachments_from_contents`. Inline content keeps no guessed MIME type: a
 * data URL's own type, or the bytes, decide it later.
 */
export function attachmentsFromContents(contents: unknown): Attachment[] {
  if (!Array.isArray(contents)) return [];
  return contents.filter(isObject).flatMap((item): Attachment[] => {
    const fileName = text(item.file_name) ?? "file";
    switch (item.type) {
      case "image_base64": {
        const content = text(item.image_base64);
        return content ? [{ type: "image", name: "image", content }] : [];
      }
      case "image_url": {
        const url = imageUrlOf(item);
        if (!url) return [];
        const mime_type = guessMime(url, "image/*");
        return [{ type: "image", name: "image", url, mime_type }];
      }
      case "file_base64": {
        const content = text(item.file_base64);
        return content ? [{ type: "file", name: fileName, content }] : [];
      }
      case "file_url": {
        const url = text(item.file_url);
        if (!url) return [];
        const mime_type = guessMime(fileName, "application/octet-stream");
        return [{ type: "file", name: fileName, url, mime_type }];
      }
      default:
        return [];
    }
  });
}

/**
 * The payload's prompt: `prompt_text`, else `input_text`, else `input.text`;
 * `input.attachments`, or when there are none the `input.contents`.
 */
export function runInputOf(payload: JsonObject): RunInput {
  const input = isObject(payload.input) ? payload.input : {};
  const listed = Array.isArray(input.attachments)
    ? input.attachments.filter(isObject).map(attachmentOf)
    : [];
  const attachments = listed.length
    ? listed
    : attachmentsFromContents(input.contents);
  const promptText = text(payload.prompt_text) ?? text(payload.input_text) ??
    text(input.text) ?? "";
  return { text: promptText, attachments };
}
