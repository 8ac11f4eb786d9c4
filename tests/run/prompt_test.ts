import assert from "node:assert/strict";
import type {
  ContentBlock,
  PromptCapabilities,
} from "@agentclientprotocol/sdk";
import {
  attachmentKind,
  isTextualMimeType,
} from "../../lib/run/attachments.ts";
import { RunnerError } from "../../lib/errors.ts";
import {
  type Attachment,
  buildPrompt,
  type BuildPromptOptions,
  type BuiltPrompt,
  promptText,
} from "../../lib/run/prompt.ts";

function build(
  attachments: Attachment[],
  options: Partial<BuildPromptOptions> = {},
): BuiltPrompt {
  return buildPrompt({
    input: { text: "Look at this", attachments },
    capabilities: {},
    ...options,
  });
}

function base64(text: string): string {
  return new TextEncoder().encode(text).toBase64();
}

// The first eight bytes of every PNG file.
const PNG_BASE64 = "iVBORw0KGgo=";
// "RIFF", a length, "WAVE": the start of a WAV file.
const WAV_BASE64 = "UklGRiQAAABXQVZF";
const TEXT_BASE64 = base64("hello\n");

const CAPABILITY_SETS: Record<string, PromptCapabilities | undefined> = {
  none: undefined,
  image: { image: true },
  audio: { audio: true },
  embeddedContext: { embeddedContext: true },
  all: { image: true, audio: true, embeddedContext: true },
};

interface KindCase {
  inline: Attachment;
  url: Attachment;
  capability: keyof PromptCapabilities;
  sentBlock: ContentBlock;
  note: string;
}

const KIND_CASES: Record<"image" | "file" | "audio", KindCase> = {
  image: {
    inline: {
      type: "image",
      name: "photo.png",
      mime_type: "image/png",
      content: PNG_BASE64,
    },
    url: {
      type: "image",
      name: "photo.png",
      mime_type: "image/png",
      url: "https://example.com/img/photo.png",
    },
    capability: "image",
    sentBlock: { type: "image", data: PNG_BASE64, mimeType: "image/png" },
    note:
      "[Attachment not sent: photo.png (image/png) — this agent does not accept inline images.]",
  },
  file: {
    inline: {
      type: "file",
      name: "notes.txt",
      mime_type: "text/plain",
      content: TEXT_BASE64,
    },
    url: {
      type: "file",
      name: "notes.txt",
      mime_type: "text/plain",
      url: "https://example.com/files/notes.txt",
    },
    capability: "embeddedContext",
    sentBlock: {
      type: "resource",
      resource: {
        uri: "attachment:///notes.txt",
        mimeType: "text/plain",
        text: "hello\n",
      },
    },
    note:
      "[Attachment not sent: notes.txt (text/plain) — this agent does not accept embedded files.]",
  },
  audio: {
    inline: {
      type: "audio",
      name: "voice.wav",
      mime_type: "audio/wav",
      content: WAV_BASE64,
    },
    url: {
      type: "audio",
      name: "voice.wav",
      mime_type: "audio/wav",
      url: "https://example.com/voice.wav",
    },
    capability: "audio",
    sentBlock: { type: "audio", data: WAV_BASE64, mimeType: "audio/wav" },
    note:
      "[Attachment not sent: voice.wav (audio/wav) — this agent does not accept inline audio.]",
  },
};

Deno.test("buildPrompt maps every capability set × inline/URL × kind", async (t) => {
  for (const [setName, capabilities] of Object.entries(CAPABILITY_SETS)) {
    for (const [kind, testCase] of Object.entries(KIND_CASES)) {
      await t.step(`${setName} × inline ${kind}`, () => {
        const result = build([testCase.inline], { capabilities });
        if (capabilities?.[testCase.capability]) {
          assert.deepEqual(result, {
            blocks: [
              { type: "text", text: "Look at this" },
              testCase.sentBlock,
            ],
            notes: [],
          });
        } else {
          assert.deepEqual(result, {
            blocks: [{
              type: "text",
              text: `Look at this\n\n${testCase.note}`,
            }],
            notes: [testCase.note],
          });
        }
      });
      await t.step(`${setName} × URL ${kind}`, () => {
        const result = build([testCase.url], { capabilities });
        assert.deepEqual(result, {
          blocks: [
            { type: "text", text: "Look at this" },
            {
              type: "resource_link",
              uri: testCase.url.url!,
              name: testCase.url.name!,
              mimeType: testCase.url.mime_type!,
            },
          ],
          notes: [],
        });
      });
    }
  }
});

Deno.test("buildPrompt puts the text block first and keeps attachment order", () => {
  const result = build([
    KIND_CASES.audio.inline,
    KIND_CASES.image.url,
    KIND_CASES.image.inline,
    KIND_CASES.file.inline,
  ], { capabilities: { image: true } });
  assert.deepEqual(result.blocks.map((block) => block.type), [
    "text",
    "resource_link",
    "image",
  ]);
  assert.deepEqual(result.notes, [KIND_CASES.audio.note, KIND_CASES.file.note]);
  assert.equal(
    promptText(result.blocks),
    `Look at this\n\n${KIND_CASES.audio.note}\n${KIND_CASES.file.note}`,
  );
});

Deno.test("buildPrompt creates a text block for notes when there is no text", () => {
  const result = buildPrompt({
    input: { attachments: [KIND_CASES.image.inline] },
    capabilities: undefined,
  });
  assert.deepEqual(result.blocks, [{
    type: "text",
    text: KIND_CASES.image.note,
  }]);
});

Deno.test("buildPrompt sends attachments alone when there is no text and nothing to note", () => {
  const result = buildPrompt({
    input: { text: "   ", attachments: [KIND_CASES.image.url] },
    capabilities: undefined,
  });
  assert.deepEqual(result.blocks.map((block) => block.type), ["resource_link"]);
});

Deno.test("buildPrompt prepends prefixText to the first text", () => {
  const result = build([KIND_CASES.image.inline], {
    prefixText: "[Run scope: conversation 42]",
  });
  assert.deepEqual(result.blocks[0], {
    type: "text",
    text:
      `[Run scope: conversation 42]\n\nLook at this\n\n${KIND_CASES.image.note}`,
  });
  const textOnly = buildPrompt({
    input: { text: "hi" },
    capabilities: undefined,
    prefixText: "scope",
  });
  assert.deepEqual(textOnly.blocks, [{ type: "text", text: "scope\n\nhi" }]);
});

Deno.test("buildPrompt refuses an input with neither text nor attachments", () => {
  for (const input of [{}, { text: "" }, { text: " \n", attachments: [] }]) {
    assert.throws(
      () =>
        buildPrompt({ input, capabilities: undefined, prefixText: "scope" }),
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.equal(error.code, "config.invalid");
        assert.equal(
          error.message,
          "input needs text or at least one attachment",
        );
        return true;
      },
    );
  }
});

Deno.test("buildPrompt refuses malformed input shapes", () => {
  const cases: [unknown, string][] = [
    [{ text: 5 }, "input.text must be a string"],
    [{ attachments: "a.png" }, "input.attachments must be a list"],
    [{ attachments: [null] }, "input.attachments[0] must be an object"],
    [
      { attachments: [{ name: "a" }, { content: 12 }] },
      "input.attachments[1].content must be a string",
    ],
  ];
  for (const [input, message] of cases) {
    assert.throws(
      () => buildPrompt({ input: input as never, capabilities: undefined }),
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.deepEqual([error.code, error.message], [
          "config.invalid",
          message,
        ]);
        return true;
      },
    );
  }
});

Deno.test("buildPrompt reads a data URL's MIME type and payload", () => {
  const result = build([{
    name: "shot",
    mime_type: "image/jpeg",
    content: `data:image/png;base64,${PNG_BASE64}`,
  }], { capabilities: { image: true } });
  assert.deepEqual(result.blocks[1], {
    type: "image",
    data: PNG_BASE64,
    mimeType: "image/png",
  });
});

Deno.test("buildPrompt treats a data: URL in url as inline content", () => {
  const attachment = {
    name: "notes.md",
    url: `data:text/markdown;charset=utf-8;base64,${base64("# Hi")}`,
  };
  assert.deepEqual(
    build([attachment], { capabilities: { embeddedContext: true } }).blocks[1],
    {
      type: "resource",
      resource: {
        uri: "attachment:///notes.md",
        mimeType: "text/markdown",
        text: "# Hi",
      },
    },
  );
  assert.deepEqual(build([attachment]).notes, [
    "[Attachment not sent: notes.md (text/markdown) — this agent does not accept embedded files.]",
  ]);
});

Deno.test("buildPrompt decodes a percent-encoded data URL", () => {
  const result = build([{
    name: "a.txt",
    content: "data:text/plain,caf%C3%A9",
  }], {
    capabilities: { embeddedContext: true },
  });
  assert.deepEqual(result.blocks[1], {
    type: "resource",
    resource: {
      uri: "attachment:///a.txt",
      mimeType: "text/plain",
      text: "café",
    },
  });
});

Deno.test("buildPrompt uses mime_type, magic bytes, extension or a default for plain base64", () => {
  const all = { image: true, audio: true, embeddedContext: true };
  const blocks = build([
    { name: "declared", mime_type: "image/webp", content: PNG_BASE64 },
    { name: "sniffed", content: PNG_BASE64 },
    { name: "song.mp3", content: base64("ID3") },
    { type: "image", name: "unknown", content: base64("???") },
    { type: "audio", name: "unknown", content: base64("???") },
    { name: "readme", content: base64("plain words\n") },
    { name: "data.bin", content: "AAECAw==" },
  ], { capabilities: all }).blocks.slice(1);
  assert.deepEqual(blocks, [
    { type: "image", data: PNG_BASE64, mimeType: "image/webp" },
    { type: "image", data: PNG_BASE64, mimeType: "image/png" },
    { type: "audio", data: base64("ID3"), mimeType: "audio/mpeg" },
    { type: "image", data: base64("???"), mimeType: "image/png" },
    { type: "audio", data: base64("???"), mimeType: "audio/wav" },
    {
      type: "resource",
      resource: {
        uri: "attachment:///readme",
        mimeType: "text/plain",
        text: "plain words\n",
      },
    },
    {
      type: "resource",
      resource: {
        uri: "attachment:///data.bin",
        mimeType: "application/octet-stream",
        blob: "AAECAw==",
      },
    },
  ]);
});

Deno.test("buildPrompt normalises base64 with whitespace, URL-safe letters and missing padding", () => {
  const result = build([{
    type: "file",
    name: "b.bin",
    mime_type: "application/octet-stream",
    content: " +/-_\n+/8 ",
  }], { capabilities: { embeddedContext: true } });
  assert.deepEqual(result.blocks[1], {
    type: "resource",
    resource: {
      uri: "attachment:///b.bin",
      mimeType: "application/octet-stream",
      blob: "+/+/+/8=",
    },
  });
});

Deno.test("buildPrompt embeds text resources only for textual, valid UTF-8 content", () => {
  const cases: [string, string, ContentBlock][] = [
    ["application/json", base64('{"a":1}'), {
      type: "resource",
      resource: {
        uri: "attachment:///f",
        mimeType: "application/json",
        text: '{"a":1}',
      },
    }],
    ["application/pdf", base64("%PDF-1.7"), {
      type: "resource",
      resource: {
        uri: "attachment:///f",
        mimeType: "application/pdf",
        blob: base64("%PDF-1.7"),
      },
    }],
    ["text/plain", "/w==", {
      type: "resource",
      resource: {
        uri: "attachment:///f",
        mimeType: "text/plain",
        blob: "/w==",
      },
    }],
  ];
  for (const [mimeType, content, expected] of cases) {
    const result = build([{ name: "f", mime_type: mimeType, content }], {
      capabilities: { embeddedContext: true },
    });
    assert.deepEqual(result.blocks[1], expected, mimeType);
  }
});

Deno.test("buildPrompt escapes the name in an embedded resource URI", () => {
  const result = build([{ name: "my notes/v2.txt", content: TEXT_BASE64 }], {
    capabilities: { embeddedContext: true },
  });
  const block = result.blocks[1];
  assert.equal(
    block.type === "resource" ? block.resource.uri : undefined,
    "attachment:///my%20notes%2Fv2.txt",
  );
});

Deno.test("isTextualMimeType knows text, JSON, XML, YAML and script types", () => {
  for (
    const mime of [
      "text/plain",
      "text/x-python; charset=utf-8",
      "application/json",
      "application/vnd.api+json",
      "application/xml",
      "application/atom+xml",
      "application/yaml",
      "application/x-yaml",
      "application/javascript",
      "application/x-sh",
    ]
  ) {
    assert.equal(isTextualMimeType(mime), true, mime);
  }
  for (
    const mime of ["application/pdf", "application/octet-stream", "image/png"]
  ) {
    assert.equal(isTextualMimeType(mime), false, mime);
  }
});

Deno.test("attachmentKind prefers type, then the MIME prefix, then file", () => {
  assert.equal(attachmentKind("image", "application/pdf"), "image");
  assert.equal(attachmentKind("audio", undefined), "audio");
  assert.equal(attachmentKind("voice", "audio/ogg"), "audio");
  assert.equal(attachmentKind(undefined, "IMAGE/JPEG"), "image");
  assert.equal(attachmentKind("video", "video/mp4"), "file");
  assert.equal(attachmentKind(undefined, undefined), "file");
});

Deno.test("buildPrompt names URL-backed attachments by name, last path segment or 'attachment'", () => {
  const result = build([
    { url: "https://example.com/a/report%20v2.pdf?x=1" },
    { url: "https://example.com/" },
    { type: "image", url: "https://example.com/p.png", name: "Cat" },
  ]);
  assert.deepEqual(result.blocks.slice(1), [
    {
      type: "resource_link",
      uri: "https://example.com/a/report%20v2.pdf?x=1",
      name: "report v2.pdf",
    },
    { type: "resource_link", uri: "https://example.com/", name: "attachment" },
    { type: "resource_link", uri: "https://example.com/p.png", name: "Cat" },
  ]);
});

Deno.test("buildPrompt links an unsendable inline attachment that also has a URL", () => {
  const result = build([{
    ...KIND_CASES.image.inline,
    url: "https://example.com/photo.png",
  }]);
  assert.deepEqual(result, {
    blocks: [
      { type: "text", text: "Look at this" },
      {
        type: "resource_link",
        uri: "https://example.com/photo.png",
        name: "photo.png",
        mimeType: "image/png",
      },
    ],
    notes: [],
  });
});

Deno.test("buildPrompt notes attachments with no content or an unusable URL", () => {
  const result = build([
    { name: "empty.png", mime_type: "image/png" },
    { name: "rel", url: "/relative/path" },
  ]);
  assert.deepEqual(result.notes, [
    "[Attachment not sent: empty.png (image/png) — it has neither content nor a URL or path.]",
    "[Attachment not sent: rel — its URL is not a valid absolute URL.]",
  ]);
});

Deno.test("buildPrompt links an attachment's path as it is, with its size, like daemon.py", () => {
  const result = build([
    { type: "file", path: "/home/al/report.pdf", size: 2048 },
    {
      type: "image",
      name: "shot.png",
      path: "/tmp/shot.png",
      content: PNG_BASE64,
      mime_type: "image/png",
    },
    { url: "https://example.com/a.txt", path: "/ignored/when/url.txt" },
  ]);
  assert.deepEqual(result, {
    blocks: [
      { type: "text", text: "Look at this" },
      {
        type: "resource_link",
        uri: "/home/al/report.pdf",
        name: "report.pdf",
        size: 2048,
      },
      {
        type: "resource_link",
        uri: "/tmp/shot.png",
        name: "shot.png",
        mimeType: "image/png",
      },
      {
        type: "resource_link",
        uri: "https://example.com/a.txt",
        name: "a.txt",
      },
    ],
    notes: [],
  });
  assert.throws(
    () => build([{ path: "/x", size: "12" as unknown as number }]),
    /size must be a whole number of bytes/,
  );
});

Deno.test("buildPrompt sends only text on follow-ups and names the attachments", () => {
  const result = build([
    { name: "a.png", content: PNG_BASE64 },
    { name: "b.pdf", url: "https://example.com/b.pdf" },
  ], {
    followUp: true,
    capabilities: { image: true, embeddedContext: true },
  });
  const note =
    "[Attachments on follow-up messages are not forwarded: a.png, b.pdf]";
  assert.deepEqual(result, {
    blocks: [{ type: "text", text: `Look at this\n\n${note}` }],
    notes: [note],
  });
  const plain = build([], { followUp: true });
  assert.deepEqual(plain, {
    blocks: [{ type: "text", text: "Look at this" }],
    notes: [],
  });
});

Deno.test("buildPrompt follow-ups do not decode attachments", () => {
  const result = build([{ name: "bad", content: "not base64!" }], {
    followUp: true,
  });
  assert.deepEqual(result.notes, [
    "[Attachments on follow-up messages are not forwarded: bad]",
  ]);
});

Deno.test("buildPrompt refuses an attachment over maxAttachmentBytes", () => {
  const content = base64("x".repeat(11));
  const atLimit = build(
    [{ name: "ten.txt", content: base64("x".repeat(10)) }],
    {
      capabilities: { embeddedContext: true },
      limits: { maxAttachmentBytes: 10 },
    },
  );
  assert.equal(atLimit.blocks.length, 2);
  assert.throws(
    () =>
      build([{ name: "big.txt", content }], {
        capabilities: { embeddedContext: true },
        limits: { maxAttachmentBytes: 10 },
      }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "prompt.attachment_too_large");
      assert.equal(
        error.message,
        'Attachment "big.txt" is 11 bytes after decoding; the limit is 10 bytes per attachment. Send a smaller file, or a URL instead.',
      );
      assert.deepEqual(error.detail, {
        attachment: "big.txt",
        bytes: 11,
        limit_bytes: 10,
      });
      return true;
    },
  );
});

Deno.test("buildPrompt applies the 10 MiB default per attachment", () => {
  const twelve = new Uint8Array(12 * 1024 * 1024).toBase64();
  assert.throws(
    () => build([{ name: "h.png", content: twelve }]),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(
        error.message,
        'Attachment "h.png" is 12 MiB after decoding; the limit is 10 MiB per attachment. Send a smaller file, or a URL instead.',
      );
      return true;
    },
  );
  const content = new Uint8Array(10 * 1024 * 1024 + 1).toBase64();
  assert.throws(
    () => build([{ name: "huge.png", content }]),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "prompt.attachment_too_large");
      assert.equal(
        error.message,
        'Attachment "huge.png" is 10485761 bytes after decoding; the limit is 10485760 bytes per attachment. Send a smaller file, or a URL instead.',
      );
      return true;
    },
  );
});

Deno.test("buildPrompt refuses attachments whose sent total exceeds maxPromptBytes", () => {
  const six = base64("x".repeat(6));
  const options = {
    capabilities: { embeddedContext: true },
    limits: { maxPromptBytes: 10 },
  };
  assert.throws(
    () =>
      build(
        [{ name: "a.txt", content: six }, { name: "b.txt", content: six }],
        options,
      ),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "prompt.attachment_too_large");
      assert.equal(
        error.message,
        `The prompt's attachments reach 12 bytes after decoding at "b.txt"; the limit is 10 bytes per prompt. Send fewer or smaller attachments, or URLs instead.`,
      );
      return true;
    },
  );
  // Attachments that are only noted or linked do not count towards the total.
  const result = build([
    { name: "a.txt", content: six },
    { name: "b.png", mime_type: "image/png", content: base64("x".repeat(20)) },
    { name: "c.txt", url: "https://example.com/c.txt" },
  ], options);
  assert.deepEqual(result.blocks.map((block) => block.type), [
    "text",
    "resource",
    "resource_link",
  ]);
});

Deno.test("buildPrompt refuses content that is not base64 or a data URL", () => {
  for (
    const content of [
      "not base64!",
      "abcde",
      "ab=c",
      "data:image/png;base64",
      "data:image/png;base64,@@@",
      "data:text/plain,%E0%A4%A",
    ]
  ) {
    assert.throws(
      () =>
        build([{ name: "x.png", content }], { capabilities: { image: true } }),
      (error) => {
        assert.ok(error instanceof RunnerError);
        assert.equal(error.code, "prompt.attachment_invalid", content);
        assert.equal(
          error.message,
          'Attachment "x.png" has content that is neither valid base64 nor a data: URL. Send its bytes base64-encoded, or as a data: URL.',
        );
        return true;
      },
    );
  }
});

Deno.test("promptText joins only the text blocks", () => {
  assert.equal(
    promptText([
      { type: "text", text: "a" },
      { type: "image", data: PNG_BASE64, mimeType: "image/png" },
      { type: "text", text: "b" },
    ]),
    "a\nb",
  );
  assert.equal(promptText([]), "");
});
