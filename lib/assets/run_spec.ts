/**
 * Builds a run's asset spec (grant, event, source) from the request's
 * `assets` field, the `knowledge-bases` config key and the run's input. See
 * `docs/assets.md`.
 *
 * @module
 */

import type {
  AssetGrant,
  AssetSourceSpec,
  KnowledgeBaseGrant,
  RunAssetsSpec,
} from "./grant.ts";
import type { RunAssetsRequest } from "./request.ts";
import type { RunInput } from "../run/prompt.ts";

/** Options for {@linkcode buildRunAssetsSpec}. */
export interface BuildRunAssetsSpecOptions {
  /** The run id. */
  runId: string;
  /** The run's conversation. */
  conversationId?: string;
  /** The validated `assets` field. */
  assets?: RunAssetsRequest;
  /** The run's first input (the current event when nothing else gives one). */
  input: RunInput;
  /** The `knowledge-bases` config key. */
  knowledgeBases: string[];
}

function selectKnowledgeBases(
  granted: KnowledgeBaseGrant[] | undefined,
  selected: string[],
): KnowledgeBaseGrant[] | undefined {
  if (selected.length === 0) return granted;
  if (!granted) {
    return selected.map((kb_id) => ({ kb_id, operations: ["retrieve"] }));
  }
  return granted.filter((kb) => selected.includes(kb.kb_id));
}

function eventFromInput(input: RunInput): Record<string, unknown> {
  const attachments = (input.attachments ?? []).map((item) =>
    Object.fromEntries(
      Object.entries({
        type: item.type,
        name: item.name,
        mime_type: item.mime_type,
      }).filter(([, value]) => value !== undefined),
    )
  );
  return {
    type: "message",
    text: input.text ?? "",
    ...(attachments.length > 0 ? { attachments } : {}),
  };
}

/**
 * The run's asset spec: the request's grant (narrowed, or given, by
 * `knowledge-bases`), event and source. Without an event and without a
 * source that could answer one, the current event is the run's input.
 */
export function buildRunAssetsSpec(
  options: BuildRunAssetsSpecOptions,
): RunAssetsSpec {
  const { assets } = options;
  const grant: AssetGrant = { ...assets?.grant };
  const knowledgeBases = selectKnowledgeBases(
    grant.knowledgeBases,
    options.knowledgeBases,
  );
  if (knowledgeBases) grant.knowledgeBases = knowledgeBases;
  const source: AssetSourceSpec | undefined = assets?.upstream
    ? { upstream: assets.upstream }
    : assets?.callback
    ? { callback: assets.callback }
    : assets?.inline
    ? { inline: assets.inline }
    : undefined;
  const eventAnswered = assets?.event !== undefined ||
    assets?.inline?.event !== undefined ||
    Boolean(assets?.upstream || assets?.callback);
  return {
    runId: options.runId,
    ...(options.conversationId
      ? { conversationId: options.conversationId }
      : {}),
    grant,
    ...(eventAnswered
      ? (assets?.event ? { event: assets.event } : {})
      : { event: eventFromInput(options.input) }),
    ...(source ? { source } : {}),
  };
}
