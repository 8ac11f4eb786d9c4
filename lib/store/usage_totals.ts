/**
 * What a conversation's runs used, added up from each run's stored usage:
 * the token counters, and the costs by currency (never converted).
 *
 * @module
 */

import { TOKEN_KEYS, type TokenCounts, type UsageCost } from "../events.ts";
import type { RunRecord, RunStore } from "./types.ts";

/** A conversation's usage: its runs' token counters and costs added up. */
export interface UsageTotals extends TokenCounts {
  /** How many of its runs reported any usage. */
  runs: number;
  /** The costs reported, added up per currency (by currency name). */
  costs: UsageCost[];
}

/** The runs' usage added up; undefined when none of them reported any. */
export function totalUsage(
  records: readonly RunRecord[],
): UsageTotals | undefined {
  const totals: UsageTotals = { runs: 0, costs: [] };
  const costs = new Map<string, number>();
  for (const { usage } of records) {
    if (!usage) continue;
    totals.runs += 1;
    for (const key of TOKEN_KEYS) {
      const value = usage[key];
      if (value !== undefined) totals[key] = (totals[key] ?? 0) + value;
    }
    if (usage.cost) {
      const { currency, amount } = usage.cost;
      costs.set(currency, (costs.get(currency) ?? 0) + amount);
    }
  }
  if (!totals.runs) return undefined;
  totals.costs = [...costs].sort(([a], [b]) => a.localeCompare(b))
    .map(([currency, amount]) => ({ amount: roundCost(amount), currency }));
  return totals;
}

/** Sums of fractions drift (0.1 + 0.2): a cost keeps 10 decimal places. */
function roundCost(amount: number): number {
  return Math.round(amount * 1e10) / 1e10;
}

/** Runs read per page while adding up a conversation. */
const PAGE = 500;

/** Every run of the conversation, newest first, page by page. */
export async function conversationRuns(
  store: RunStore,
  conversationId: string,
): Promise<RunRecord[]> {
  const runs: RunRecord[] = [];
  for (;;) {
    const page = await store.listRuns({
      conversationId,
      limit: PAGE,
      before: runs.at(-1)?.runId,
    });
    runs.push(...page);
    if (page.length < PAGE) return runs;
  }
}
