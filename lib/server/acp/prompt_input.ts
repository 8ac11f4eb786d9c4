/**
 * An `/acp` client's `session/prompt` content as a run's input: text blocks
 * become the text, images, audio and resources become attachments (checked
 * and sized by the run like any caller's), links stay links.
 *
 * @module
 */

import type { ContentBlock } from "@agentclientprotocol/sdk";
import type { Attachment, RunInput } from "../../run/prompt.ts";

/** The run input of a prompt's content blocks. */
export function promptInput(blocks: ContentBlock[]): RunInput {
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  for (const block of blocks) {
    switch (block.type) {
      case "text":
        texts.push(block.text);
        break;
      case "image":
      case "audio":
        attachments.push({
          type: block.type,
          mime_type: block.mimeType,
          content: block.data,
          ...(block.type === "image" && block.uri ? { name: block.uri } : {}),
        });
        break;
      case "resource_link":
        attachments.push({
          type: "file",
          name: block.name,
          url: block.uri,
          ...(block.mimeType ? { mime_type: block.mimeType } : {}),
          ...(typeof block.size === "number" ? { size: block.size } : {}),
        });
        break;
      case "resource": {
        const resource = block.resource;
        if ("text" in resource) {
          texts.push(
            `<resource uri="${resource.uri}">\n${resource.text}\n</resource>`,
          );
        } else {
          attachments.push({
            type: "file",
            name: resource.uri,
            mime_type: resource.mimeType ?? undefined,
            content: resource.blob,
          });
        }
        break;
      }
    }
  }
  return {
    text: texts.join("\n\n"),
    ...(attachments.length ? { attachments } : {}),
  };
}
