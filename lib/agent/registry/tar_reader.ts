/**
 * A tar reader (ustar, GNU long names, pax paths) that yields only regular
 * files, directories and links, and refuses device files, FIFOs, hostile
 * names and sizes past the limit before reading them.
 *
 * @module
 */

import {
  type ArchiveBudget,
  type ArchiveEntry,
  archiveRefused,
  safeEntryPath,
} from "./archive_entry.ts";

const BLOCK = 512;
const decoder = new TextDecoder();

/** Reads every member of an uncompressed tar archive. */
export function readTar(
  bytes: Uint8Array,
  budget: ArchiveBudget,
): ArchiveEntry[] {
  const entries: ArchiveEntry[] = [];
  let offset = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax: Record<string, string> = {};
  while (offset + BLOCK <= bytes.length) {
    const header = bytes.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) break;
    checkChecksum(header);
    const type = String.fromCharCode(header[156] || 0x30);
    const size = pax.size !== undefined
      ? Number(pax.size)
      : octal(header, 124, 12);
    if (!Number.isSafeInteger(size) || size < 0) {
      throw archiveRefused("an entry has an unreadable size");
    }
    budget.spend(size);
    const start = offset + BLOCK;
    const end = start + size;
    if (end > bytes.length) throw archiveRefused("it ends inside an entry");
    offset = start + Math.ceil(size / BLOCK) * BLOCK;
    const body = bytes.subarray(start, end);
    if (type === "L") {
      longName = cString(body);
      continue;
    }
    if (type === "K") {
      longLink = cString(body);
      continue;
    }
    if (type === "x") {
      pax = readPax(body);
      continue;
    }
    if (type === "g") continue; // global pax values: nothing we use
    const prefix = field(header, 345, 155);
    const name = pax.path ?? longName ??
      (prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100));
    const target = pax.linkpath ?? longLink ?? field(header, 157, 100);
    const mode = octal(header, 100, 8) & 0o777;
    longName = longLink = undefined;
    pax = {};
    const path = safeEntryPath(name);
    switch (type) {
      case "0":
      case "7":
        if (!path) throw archiveRefused("a file entry has an empty name");
        entries.push({ path, kind: "file", mode, data: body });
        break;
      case "5":
        if (path) entries.push({ path, kind: "directory", mode });
        break;
      case "2":
        entries.push({ path, kind: "symlink", target });
        break;
      case "1":
        entries.push({ path, kind: "hardlink", target });
        break;
      default:
        throw archiveRefused(
          `entry ${JSON.stringify(name)} is a ${kindName(type)}`,
        );
    }
  }
  return entries;
}

function kindName(type: string): string {
  if (type === "3") return "character device";
  if (type === "4") return "block device";
  if (type === "6") return "FIFO";
  return `member of unsupported type ${JSON.stringify(type)}`;
}

function field(header: Uint8Array, at: number, length: number): string {
  return cString(header.subarray(at, at + length));
}

function cString(bytes: Uint8Array): string {
  const end = bytes.indexOf(0);
  return decoder.decode(end === -1 ? bytes : bytes.subarray(0, end));
}

/** An octal number field, or GNU's base-256 form for big values. */
function octal(header: Uint8Array, at: number, length: number): number {
  const bytes = header.subarray(at, at + length);
  if (bytes[0] & 0x80) {
    let value = bytes[0] & 0x7f;
    for (const byte of bytes.subarray(1)) value = value * 256 + byte;
    return value;
  }
  const text = cString(bytes).trim();
  if (text === "") return 0;
  if (!/^[0-7]+$/.test(text)) throw archiveRefused("a header is not tar");
  return parseInt(text, 8);
}

function checkChecksum(header: Uint8Array): void {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) {
    sum += i >= 148 && i < 156 ? 0x20 : header[i];
  }
  if (octal(header, 148, 8) !== sum) {
    throw archiveRefused(
      "a tar header's checksum is wrong (not a tar archive?)",
    );
  }
}

/** A pax extended header's records (`<len> <key>=<value>\n`). */
function readPax(body: Uint8Array): Record<string, string> {
  const values: Record<string, string> = {};
  let at = 0;
  while (at < body.length) {
    const space = body.indexOf(0x20, at);
    if (space === -1) break;
    const length = parseInt(decoder.decode(body.subarray(at, space)), 10);
    if (!Number.isSafeInteger(length) || length <= 0) {
      throw archiveRefused("a pax header is malformed");
    }
    const record = decoder.decode(body.subarray(space + 1, at + length - 1));
    const equals = record.indexOf("=");
    if (equals > 0) values[record.slice(0, equals)] = record.slice(equals + 1);
    at += length;
  }
  if (values.size !== undefined && !/^\d+$/.test(values.size)) {
    throw archiveRefused("a pax size is not a number");
  }
  return values;
}
