/**
 * Answers for read-only assets supplied inline with a run: history pages
 * with opaque cursors, a simple term-match knowledge retrieval, and static
 * tool results.
 *
 * @module
 */

import type { HistoryItem, InlineKnowledge } from "../grant.ts";

/** Checked `langbot_history_page` arguments. */
export interface HistoryPageArgs {
  before_cursor?: string;
  after_cursor?: string;
  limit: number;
  direction: "backward" | "forward";
  include_attachments?: boolean;
}

/** One history page, items oldest first. */
export interface HistoryPage {
  items: HistoryItem[];
  direction: "backward" | "forward";
  /** Whether more items exist in the requested direction. */
  has_more: boolean;
  /** The cursor that continues in the requested direction, or null at the end. */
  next_cursor: string | null;
  /** Pass as `before_cursor` for the items older than this page. */
  before_cursor: string | null;
  /** Pass as `after_cursor` for the items newer than this page. */
  after_cursor: string | null;
}

const CURSOR_PREFIX = "h1.";

function encodeCursor(position: number): string {
  const json = JSON.stringify({ p: position });
  return CURSOR_PREFIX +
    btoa(json).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function decodeCursor(cursor: string, count: number): number | undefined {
  if (!cursor.startsWith(CURSOR_PREFIX)) return undefined;
  try {
    const base64 = cursor.slice(CURSOR_PREFIX.length).replaceAll("-", "+")
      .replaceAll("_", "/");
    const { p } = JSON.parse(atob(base64));
    return Number.isInteger(p) && p >= 0 && p < count ? p : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Pages `history` (oldest first): backward from the newest item by default,
 * or forward from the oldest; cursors exclude the items already returned, so
 * following `next_cursor` yields every item exactly once.
 */
export function pageHistory(
  history: readonly HistoryItem[],
  args: HistoryPageArgs,
): { ok: true; page: HistoryPage } | { ok: false; problem: string } {
  let lower = 0;
  let upper = history.length;
  if (args.after_cursor !== undefined) {
    const position = decodeCursor(args.after_cursor, history.length);
    if (position === undefined) {
      return { ok: false, problem: "after_cursor is not a valid cursor" };
    }
    lower = position + 1;
  }
  if (args.before_cursor !== undefined) {
    const position = decodeCursor(args.before_cursor, history.length);
    if (position === undefined) {
      return { ok: false, problem: "before_cursor is not a valid cursor" };
    }
    upper = position;
  }
  upper = Math.max(lower, upper);
  const start = args.direction === "backward"
    ? Math.max(lower, upper - args.limit)
    : lower;
  const end = args.direction === "backward"
    ? upper
    : Math.min(upper, lower + args.limit);
  const items = history.slice(start, end).map((item) => {
    if (args.include_attachments) return { ...item };
    const { attachments: _dropped, ...rest } = item;
    return rest;
  });
  const hasMore = args.direction === "backward" ? start > lower : end < upper;
  const before = items.length > 0 ? encodeCursor(start) : null;
  const after = items.length > 0 ? encodeCursor(end - 1) : null;
  return {
    ok: true,
    page: {
      items,
      direction: args.direction,
      has_more: hasMore,
      next_cursor: hasMore
        ? (args.direction === "backward" ? before : after)
        : null,
      before_cursor: before,
      after_cursor: after,
    },
  };
}

const TERM = new RegExp(
  String
    .raw`\p{Script=Han}|\p{Script=Hiragana}|\p{Script=Katakana}|[^\s\p{P}\p{S}\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}]+`,
  "gu",
);

function terms(text: string): Set<string> {
  return new Set(text.toLowerCase().match(TERM) ?? []);
}

function metadataMatches(
  metadata: Record<string, unknown> | undefined,
  filters: Record<string, unknown> | undefined,
): boolean {
  if (!filters) return true;
  return Object.entries(filters).every(([key, wanted]) =>
    JSON.stringify(metadata?.[key]) === JSON.stringify(wanted)
  );
}

/** Checked `langbot_retrieve_knowledge` arguments. */
export interface RetrieveArgs {
  kb_id: string;
  query_text: string;
  top_k: number;
  filters?: Record<string, unknown>;
}

/**
 * Ranks a knowledge base's snippets by the share of distinct query terms they
 * contain (ties: the snippet's own score, then its position); snippets with no
 * query term, or failing a metadata filter, are left out.
 */
export function retrieveInline(
  knowledge: readonly InlineKnowledge[],
  args: RetrieveArgs,
): Record<string, unknown> {
  const snippets = knowledge.filter((kb) => kb.kb_id === args.kb_id).flatMap((
    kb,
  ) => kb.snippets);
  const queryTerms = [...terms(args.query_text)];
  const ranked = snippets
    .map((snippet, index) => {
      const snippetTerms = terms(snippet.text);
      const hits = queryTerms.filter((term) => snippetTerms.has(term)).length;
      return {
        snippet,
        index,
        score: queryTerms.length > 0 ? hits / queryTerms.length : 0,
      };
    })
    .filter((entry) =>
      entry.score > 0 && metadataMatches(entry.snippet.metadata, args.filters)
    )
    .sort((a, b) =>
      b.score - a.score || (b.snippet.score ?? 0) - (a.snippet.score ?? 0) ||
      a.index - b.index
    )
    .slice(0, args.top_k);
  return {
    kb_id: args.kb_id,
    query_text: args.query_text,
    top_k: args.top_k,
    results: ranked.map(({ snippet, score }) => ({
      text: snippet.text,
      score: Math.round(score * 10000) / 10000,
      metadata: snippet.metadata ?? {},
    })),
  };
}
