import assert from "node:assert/strict";
import { join } from "node:path";
import type { Attachment } from "../../lib/run/prompt.ts";
import { EventLog, fixtureConfig, harness } from "../engine_helpers.ts";
import { readRecord, tempDir } from "../helpers.ts";

const PNG = "iVBORw0KGgo=";
const WAV = "UklGRgAAAABXQVZF";
const TEXT = btoa("hello file");

const attachments: Attachment[] = [
  { type: "image", name: "photo.png", mime_type: "image/png", content: PNG },
  { type: "file", name: "notes.txt", mime_type: "text/plain", content: TEXT },
  {
    type: "audio",
    name: "voice.wav",
    mime_type: "audio/wav",
    content: `data:audio/wav;base64,${WAV}`,
  },
  {
    type: "image",
    name: "remote.png",
    mime_type: "image/png",
    url: "https://files.example/remote.png",
  },
];

async function promptBlocks(capabilityFlags: string[]): Promise<unknown[]> {
  const h = harness();
  try {
    const record = join(tempDir(), "record.jsonl");
    const config = fixtureConfig([
      "--text",
      "ok",
      "--record",
      record,
      ...capabilityFlags,
    ]);
    const { run } = await h.manager.start({
      input: { text: "look", attachments },
      config,
    });
    new EventLog(run);
    assert.equal((await run.done).status, "completed");
    const prompt = readRecord(record).find((line) =>
      line.method === "session/prompt"
    )!;
    return (prompt.params as { prompt: unknown[] }).prompt;
  } finally {
    await h.close();
  }
}

const link = {
  type: "resource_link",
  uri: "https://files.example/remote.png",
  name: "remote.png",
  mimeType: "image/png",
};

Deno.test("an agent without prompt capabilities gets text, a link, and a note naming what was not sent", async () => {
  const blocks = await promptBlocks([]);
  assert.deepEqual(blocks, [
    {
      type: "text",
      text: "look\n\n" +
        "[Attachment not sent: photo.png (image/png) — this agent does not accept inline images.]\n" +
        "[Attachment not sent: notes.txt (text/plain) — this agent does not accept embedded files.]\n" +
        "[Attachment not sent: voice.wav (audio/wav) — this agent does not accept inline audio.]",
    },
    link,
  ]);
});

Deno.test("an agent with image, audio and embeddedContext gets every block inline", async () => {
  const blocks = await promptBlocks([
    "--image",
    "--audio",
    "--embedded-context",
  ]);
  assert.deepEqual(blocks, [
    { type: "text", text: "look" },
    { type: "image", data: PNG, mimeType: "image/png" },
    {
      type: "resource",
      resource: {
        uri: "attachment:///notes.txt",
        mimeType: "text/plain",
        text: "hello file",
      },
    },
    { type: "audio", data: WAV, mimeType: "audio/wav" },
    link,
  ]);
});

Deno.test("an image-only agent gets the image and notes for the rest", async () => {
  const blocks = await promptBlocks(["--image"]);
  assert.equal(
    (blocks[0] as { text: string }).text.includes("notes.txt"),
    true,
  );
  assert.equal(
    (blocks[0] as { text: string }).text.includes("photo.png"),
    false,
  );
  assert.deepEqual(blocks.slice(1), [{
    type: "image",
    data: PNG,
    mimeType: "image/png",
  }, link]);
});
