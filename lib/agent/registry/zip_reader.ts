/**
 * A zip reader (stored and deflated members, read by the central directory)
 * that yields only regular files, directories and symbolic links, checks
 * each member's CRC-32 and size, and never inflates past the limit.
 *
 * @module
 */

import {
  type ArchiveBudget,
  type ArchiveEntry,
  archiveRefused,
  safeEntryPath,
} from "./archive_entry.ts";
import { inflateLimited } from "./decompress.ts";

const END_OF_DIRECTORY = 0x06054b50;
const DIRECTORY_ENTRY = 0x02014b50;
const LOCAL_HEADER = 0x04034b50;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const decoder = new TextDecoder();

/** Reads every member of a zip archive. */
export async function readZip(
  bytes: Uint8Array,
  budget: ArchiveBudget,
): Promise<ArchiveEntry[]> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = findEndOfDirectory(view);
  const count = view.getUint16(end + 10, true);
  let at = view.getUint32(end + 16, true);
  const entries: ArchiveEntry[] = [];
  for (let index = 0; index < count; index++) {
    if (
      at + 46 > bytes.length || view.getUint32(at, true) !== DIRECTORY_ENTRY
    ) {
      throw archiveRefused("its central directory is damaged");
    }
    const flags = view.getUint16(at + 8, true);
    const method = view.getUint16(at + 10, true);
    const crc = view.getUint32(at + 16, true);
    const packedSize = view.getUint32(at + 20, true);
    const size = view.getUint32(at + 24, true);
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const commentLength = view.getUint16(at + 32, true);
    const madeBy = view.getUint16(at + 4, true) >> 8;
    const external = view.getUint32(at + 38, true);
    const local = view.getUint32(at + 42, true);
    const name = decoder.decode(bytes.subarray(at + 46, at + 46 + nameLength));
    at += 46 + nameLength + extraLength + commentLength;
    if (size === 0xffffffff || packedSize === 0xffffffff) {
      throw archiveRefused("zip64 archives are not supported");
    }
    if (flags & 0x1) {
      throw archiveRefused(`entry ${JSON.stringify(name)} is encrypted`);
    }
    budget.spend(size);
    const path = safeEntryPath(name);
    // Unix permissions live in the external attributes' upper half.
    const unixMode = madeBy === 3 ? external >>> 16 : 0;
    const type = unixMode & S_IFMT;
    const isDirectory = name.endsWith("/") || type === S_IFDIR;
    if (type !== 0 && ![S_IFREG, S_IFDIR, S_IFLNK].includes(type)) {
      throw archiveRefused(
        `entry ${JSON.stringify(name)} is a device file or other special file`,
      );
    }
    if (isDirectory) {
      if (path) entries.push({ path, kind: "directory" });
      continue;
    }
    if (!path) throw archiveRefused("a file entry has an empty name");
    const data = await memberData(bytes, view, {
      local,
      method,
      packedSize,
      size,
      name,
    });
    if (crc32(data) !== crc) {
      throw archiveRefused(`entry ${JSON.stringify(name)} fails its CRC check`);
    }
    if (type === S_IFLNK) {
      entries.push({ path, kind: "symlink", target: decoder.decode(data) });
    } else {
      entries.push({
        path,
        kind: "file",
        data,
        ...(unixMode ? { mode: unixMode & 0o777 } : {}),
      });
    }
  }
  return entries;
}

function findEndOfDirectory(view: DataView): number {
  const lowest = Math.max(0, view.byteLength - 22 - 0xffff);
  for (let at = view.byteLength - 22; at >= lowest; at--) {
    if (view.getUint32(at, true) === END_OF_DIRECTORY) return at;
  }
  throw archiveRefused("it is not a zip archive (no central directory)");
}

interface Member {
  local: number;
  method: number;
  packedSize: number;
  size: number;
  name: string;
}

async function memberData(
  bytes: Uint8Array,
  view: DataView,
  member: Member,
): Promise<Uint8Array> {
  const { local, method, packedSize, size, name } = member;
  if (
    local + 30 > bytes.length || view.getUint32(local, true) !== LOCAL_HEADER
  ) {
    throw archiveRefused(`entry ${JSON.stringify(name)} has no local header`);
  }
  const start = local + 30 + view.getUint16(local + 26, true) +
    view.getUint16(local + 28, true);
  if (start + packedSize > bytes.length) {
    throw archiveRefused(`entry ${JSON.stringify(name)} runs past the archive`);
  }
  const packed = bytes.subarray(start, start + packedSize);
  let data: Uint8Array;
  if (method === 0) data = packed;
  else if (method === 8) {
    data = await inflateLimited(
      packed,
      "deflate-raw",
      size,
      `entry ${JSON.stringify(name)} is larger than it says`,
    );
  } else {
    throw archiveRefused(
      `entry ${JSON.stringify(name)} uses compression method ${method}`,
    );
  }
  if (data.length !== size) {
    throw archiveRefused(
      `entry ${JSON.stringify(name)} is not the size it says`,
    );
  }
  return data;
}

let crcTable: Uint32Array | undefined;

/** The CRC-32 (IEEE) of `data`. */
export function crc32(data: Uint8Array): number {
  crcTable ??= Uint32Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  let crc = 0xffffffff;
  for (const byte of data) crc = crcTable[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
