/**
 * The JSON encodings of the relay: Python's `json.dumps` text, which the hub
 * side reproduces byte for byte, the UTF-8 cost of JSON string escaping,
 * which the `message.delta` splitter counts, and the truncation that makes an
 * oversized event fit one frame.
 *
 * @module
 */

/**
 * Serializes like Python's `json.dumps(value, ensure_ascii=False)`: separators
 * `", "` and `": "`, non-ASCII raw, insertion key order, `undefined` keys left out.
 */
export function pythonJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      return Number.isFinite(value) ? JSON.stringify(value) : "null";
    case "object": {
      if (Array.isArray(value)) {
        return `[${value.map((item) => pythonJsonDumps(item)).join(", ")}]`;
      }
      const parts: string[] = [];
      for (const [key, item] of Object.entries(value)) {
        if (item === undefined) continue;
        parts.push(`${JSON.stringify(key)}: ${pythonJsonDumps(item)}`);
      }
      return `{${parts.join(", ")}}`;
    }
    default:
      return "null";
  }
}

/** UTF-8 bytes of one UTF-16 unit once JSON-escaped (a surrogate pair counts 2+2). */
export function escapedUnitBytes(code: number): number {
  if (code === 0x22 || code === 0x5c) return 2;
  if (code < 0x20) {
    return code === 8 || code === 9 || code === 10 || code === 12 || code === 13
      ? 2
      : 6;
  }
  if (code < 0x80) return 1;
  if (code < 0x800) return 2;
  if (code >= 0xd800 && code <= 0xdfff) return 2;
  return 3;
}

type JsonRecord = { [key: string]: unknown };

interface Field {
  parent: JsonRecord;
  key: string;
  bytes: number;
}

/** `,"truncated":true`: what one flag adds to an object's encoding. */
const FLAG_BYTES = 17;

function isRecord(value: unknown): value is JsonRecord {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function escapedBytes(text: string): number {
  let total = 0;
  for (let index = 0; index < text.length; index++) {
    total += escapedUnitBytes(text.charCodeAt(index));
  }
  return total;
}

/** The longest prefix of `text` whose escaped form takes at most `budget` bytes. */
function prefixWithin(text: string, budget: number): string {
  let used = 0;
  let end = 0;
  while (end < text.length) {
    const cost = escapedUnitBytes(text.charCodeAt(end));
    if (used + cost > budget) break;
    used += cost;
    end += 1;
  }
  const last = text.charCodeAt(end - 1);
  if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

/** Object fields below `value` (arrays are walked) whose value passes `test`. */
function fieldsOf(
  value: unknown,
  test: (item: unknown) => boolean,
  found: Field[] = [],
): Field[] {
  if (Array.isArray(value)) {
    for (const item of value) fieldsOf(item, test, found);
  } else if (isRecord(value)) {
    for (const [key, item] of Object.entries(value)) {
      if (key !== "truncated" && test(item)) {
        const bytes = typeof item === "string"
          ? escapedBytes(item)
          : JSON.stringify(item).length;
        found.push({ parent: value, key, bytes });
      }
      fieldsOf(item, test, found);
    }
  }
  return found;
}

/**
 * Shrinks `root` in place until `excess()` (the bytes its encoding is over
 * a limit) is at most 0: the largest strings first are cut to a prefix, then,
 * if that is not enough, the largest nested objects and arrays become `null`.
 * Each cut field gets `"truncated": true` beside it. Returns whether it fits.
 */
export function truncateToFit(
  root: JsonRecord,
  excess: () => number,
): boolean {
  const largestFirst = (a: Field, b: Field) => b.bytes - a.bytes;
  // Savings are counted locally and checked against `excess()` once per
  // round, so a frame with many strings is not re-encoded per string.
  for (let round = 0; round < 3; round++) {
    let over = excess();
    if (over <= 0) return true;
    const strings = fieldsOf(root, (item) => typeof item === "string")
      .sort(largestFirst);
    for (const field of strings) {
      if (over <= 0 || field.bytes <= FLAG_BYTES) break;
      const flag = field.parent.truncated === true ? 0 : FLAG_BYTES;
      const text = field.parent[field.key] as string;
      const kept = prefixWithin(text, field.bytes - over - flag);
      field.parent[field.key] = kept;
      field.parent.truncated = true;
      over -= field.bytes - escapedBytes(kept) - flag;
    }
  }
  for (let round = 0; round < 3; round++) {
    let over = excess();
    if (over <= 0) return true;
    const containers = fieldsOf(
      root,
      (item) => typeof item === "object" && item !== null,
    ).sort(largestFirst);
    for (const field of containers) {
      if (over <= 0) break;
      const flag = field.parent.truncated === true ? 0 : FLAG_BYTES;
      field.parent[field.key] = null;
      field.parent.truncated = true;
      over -= field.bytes - "null".length - flag;
    }
  }
  return excess() <= 0;
}
