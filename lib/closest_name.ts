/**
 * "Did you mean …?": the known name a mistyped one most likely meant, for
 * the error messages of config keys, flags and provider names.
 *
 * @module
 */

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  const rows = Array.from(
    { length: a.length + 1 },
    (_, i) => Array.from({ length: b.length + 1 }, (_, j) => i || j),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      rows[i][j] = Math.min(
        rows[i - 1][j] + 1,
        rows[i][j - 1] + 1,
        rows[i - 1][j - 1] + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1);
      }
    }
  }
  return rows[a.length][b.length];
}

/**
 * The candidate a mistyped `name` most likely meant: the closest by edit
 * distance, if it is within a third of its length (at least 1, at most 3).
 */
export function closestName(
  name: string,
  candidates: readonly string[],
): string | undefined {
  const typed = name.toLowerCase();
  let best: { candidate: string; distance: number } | undefined;
  for (const candidate of candidates) {
    const distance = editDistance(typed, candidate.toLowerCase());
    if (!best || distance < best.distance) best = { candidate, distance };
  }
  const limit = Math.min(3, Math.max(1, Math.floor(typed.length / 3)));
  return best && best.distance > 0 && best.distance <= limit
    ? best.candidate
    : undefined;
}
