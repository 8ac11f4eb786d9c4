/**
 * The JSON encodings of the relay: Python's `json.dumps` text, which the hub
 * side reproduces byte for byte, and the UTF-8 cost of JSON string escaping,
 * which the `message.delta` splitter counts.
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
