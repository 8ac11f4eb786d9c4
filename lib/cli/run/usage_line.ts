/**
 * The one usage line `runner run` prints on stderr at the end of a run when
 * stderr is a terminal: the tokens the agent reported, its context window
 * and cost.
 *
 * @module
 */

import type { RunUsage } from "../../events.ts";

/**
 * `usage` as one line, e.g. `[usage] 162 tokens (100 prompt, 20 completion,
 * 30 cached read, 5 cached write, 7 thought); context 1000/200000; cost 0.25
 * USD`; undefined when the agent reported nothing.
 */
export function usageLine(usage: RunUsage | undefined): string | undefined {
  if (!usage) return undefined;
  const parts: string[] = [];
  const kinds = [
    ["prompt_tokens", "prompt"],
    ["completion_tokens", "completion"],
    ["cached_read_tokens", "cached read"],
    ["cached_write_tokens", "cached write"],
    ["thought_tokens", "thought"],
  ] as const;
  const counted = kinds.filter(([key]) => usage[key] !== undefined)
    .map(([key, label]) => `${usage[key]} ${label}`);
  if (usage.total_tokens !== undefined) {
    parts.push(
      `${usage.total_tokens} tokens${
        counted.length ? ` (${counted.join(", ")})` : ""
      }`,
    );
  } else if (counted.length) parts.push(`tokens: ${counted.join(", ")}`);
  if (usage.used !== undefined) {
    parts.push(
      `context ${usage.used}${
        usage.size !== undefined ? `/${usage.size}` : ""
      }`,
    );
  }
  if (usage.cost) {
    parts.push(`cost ${usage.cost.amount} ${usage.cost.currency}`);
  }
  return parts.length ? `[usage] ${parts.join("; ")}\n` : undefined;
}
