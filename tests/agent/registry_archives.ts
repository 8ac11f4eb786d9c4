/**
 * Builds tar, tar.gz and zip archives byte by byte for the registry tests,
 * hostile ones included (`../` names, links out, device files, sizes that
 * lie), and the fixture agent packaged as a "binary".
 *
 * @module
 */

import { crc32 } from "../../lib/agent/registry/zip_reader.ts";
import { ROOT } from "../helpers.ts";

/** One member of a test archive. */
export interface TestMember {
  /** The name as written into the archive (not checked). */
  name: string;
  /** `file` (default), `dir`, `symlink`, `hardlink`, `chardev`, `fifo`. */
  kind?: "file" | "dir" | "symlink" | "hardlink" | "chardev" | "fifo";
  /** A file's content. */
  content?: string | Uint8Array;
  /** A link's target. */
  target?: string;
  /** Permission bits (default 0o644; 0o755 for dirs). */
  mode?: number;
  /** The size the header claims, when it should lie. */
  claimedSize?: number;
}

const encoder = new TextEncoder();

function bytesOf(content: string | Uint8Array | undefined): Uint8Array {
  return typeof content === "string"
    ? encoder.encode(content)
    : content ?? new Uint8Array();
}

const TAR_TYPES = {
  file: "0",
  hardlink: "1",
  symlink: "2",
  chardev: "3",
  dir: "5",
  fifo: "6",
} as const;

/** An uncompressed ustar archive of `members`. */
export function tarOf(members: TestMember[]): Uint8Array {
  const blocks: Uint8Array[] = [];
  for (const member of members) {
    const kind = member.kind ?? "file";
    const data = kind === "file" ? bytesOf(member.content) : new Uint8Array();
    const header = new Uint8Array(512);
    const put = (at: number, text: string) =>
      header.set(encoder.encode(text), at);
    const octal = (value: number, length: number) =>
      value.toString(8).padStart(length - 1, "0");
    put(0, member.name.slice(0, 100));
    put(100, octal(member.mode ?? (kind === "dir" ? 0o755 : 0o644), 8));
    put(108, octal(0, 8));
    put(116, octal(0, 8));
    put(124, octal(member.claimedSize ?? data.length, 12));
    put(136, octal(0, 12));
    put(148, "        ");
    put(156, TAR_TYPES[kind]);
    put(157, (member.target ?? "").slice(0, 100));
    put(257, "ustar\x0000");
    let sum = 0;
    for (const byte of header) sum += byte;
    put(148, octal(sum, 7) + "\0");
    blocks.push(header);
    blocks.push(data);
    const pad = (512 - (data.length % 512)) % 512;
    blocks.push(new Uint8Array(pad));
  }
  blocks.push(new Uint8Array(1024));
  return concat(blocks);
}

/** `bytes` gzipped. */
export async function gzip(bytes: Uint8Array): Promise<Uint8Array> {
  return await compress(bytes, "gzip");
}

async function compress(
  bytes: Uint8Array,
  format: "gzip" | "deflate-raw",
): Promise<Uint8Array> {
  const stream = new Blob([bytes as Uint8Array<ArrayBuffer>]).stream()
    .pipeThrough(new CompressionStream(format));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** A zip archive of `members` (deflated files, unix modes and links). */
export async function zipOf(members: TestMember[]): Promise<Uint8Array> {
  const locals: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  for (const member of members) {
    const kind = member.kind ?? "file";
    const raw = kind === "symlink"
      ? encoder.encode(member.target ?? "")
      : bytesOf(member.content);
    const packed = kind === "file" ? await compress(raw, "deflate-raw") : raw;
    const method = kind === "file" ? 8 : 0;
    const name = encoder.encode(member.name);
    const type = kind === "dir"
      ? 0o040000
      : kind === "symlink"
      ? 0o120000
      : kind === "chardev"
      ? 0o020000
      : 0o100000;
    const mode = type | (member.mode ?? (kind === "dir" ? 0o755 : 0o644));
    const crc = crc32(raw);
    const size = member.claimedSize ?? raw.length;
    const local = new DataView(new ArrayBuffer(30));
    local.setUint32(0, 0x04034b50, true);
    local.setUint16(4, 20, true);
    local.setUint16(8, method, true);
    local.setUint32(14, crc, true);
    local.setUint32(18, packed.length, true);
    local.setUint32(22, size, true);
    local.setUint16(26, name.length, true);
    locals.push(new Uint8Array(local.buffer), name, packed);
    const entry = new DataView(new ArrayBuffer(46));
    entry.setUint32(0, 0x02014b50, true);
    entry.setUint16(4, (3 << 8) | 20, true);
    entry.setUint16(6, 20, true);
    entry.setUint16(10, method, true);
    entry.setUint32(16, crc, true);
    entry.setUint32(20, packed.length, true);
    entry.setUint32(24, size, true);
    entry.setUint16(28, name.length, true);
    entry.setUint32(38, (mode << 16) >>> 0, true);
    entry.setUint32(42, offset, true);
    central.push(new Uint8Array(entry.buffer), name);
    offset += 30 + name.length + packed.length;
  }
  const directory = concat(central);
  const end = new DataView(new ArrayBuffer(22));
  end.setUint32(0, 0x06054b50, true);
  end.setUint16(8, members.length, true);
  end.setUint16(10, members.length, true);
  end.setUint32(12, directory.length, true);
  end.setUint32(16, offset, true);
  return concat([...locals, directory, new Uint8Array(end.buffer)]);
}

function concat(parts: Uint8Array[]): Uint8Array {
  const all = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) {
    all.set(part, at);
    at += part.length;
  }
  return all;
}

/**
 * The fixture agent as a "binary": a shell script that execs
 * `deno run … tests/fixtures/agent.ts` with its arguments.
 */
export function fixtureAgentScript(
  options: { confined?: boolean } = {},
): string {
  // Confined, the repository is read-only: Deno must not set up node_modules.
  const modules = options.confined ? " --node-modules-dir=manual" : "";
  return [
    "#!/bin/sh",
    `exec '${Deno.execPath()}' run -A${modules} --config '${ROOT}deno.json' '${ROOT}tests/fixtures/agent.ts' "$@"`,
    "",
  ].join("\n");
}

/**
 * A gzipped tar of the fixture agent at `bin/run-agent`, with `padding`
 * bytes of noise (which does not compress) beside it when asked, so that
 * its download takes several reads.
 */
export async function fixtureAgentArchive(
  options: { padding?: number; confined?: boolean } = {},
): Promise<Uint8Array> {
  const padding = options.padding ?? 0;
  const noise = new Uint8Array(padding);
  for (let at = 0; at < padding; at += 65536) {
    crypto.getRandomValues(noise.subarray(at, Math.min(at + 65536, padding)));
  }
  const script = fixtureAgentScript({ confined: options.confined });
  return await gzip(tarOf([
    { name: "bin/run-agent", content: script, mode: 0o755 },
    ...(padding ? [{ name: "share/blob", content: noise }] : []),
  ]));
}
