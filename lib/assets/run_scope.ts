/**
 * The run-scope note prepended to a run's first prompt: which LangBot assets
 * exist and how to reach them. It never carries a token.
 *
 * @module
 */

import {
  canPageHistory,
  retrievableKnowledgeBase,
  type RunAssetsSpec,
} from "./grant.ts";

function names(values: string[]): string {
  return values.length > 0 ? values.join(", ") : "none";
}

/** The short run-scope guidance for the agent's first prompt. */
export function runScopeNote(spec: RunAssetsSpec, runId: string): string {
  const tools = spec.grant.tools ?? [];
  const kbs = (spec.grant.knowledgeBases ?? [])
    .filter((kb) => retrievableKnowledgeBase(spec.grant, kb.kb_id))
    .map((kb) =>
      kb.name && kb.name !== kb.kb_id ? `${kb.kb_id} (${kb.name})` : kb.kb_id
    );
  const toolsOf = (predicate: (type: string | undefined) => boolean) =>
    names(
      tools.filter((tool) => predicate(tool.type)).map((tool) =>
        tool.tool_name
      ),
    );
  const lines = [
    `[LangBot run scope] Run id ${runId} (for diagnostics only; never pass it to tools).`,
    "LangBot assets for this run are available through the langbot_* tools of the " +
    '"langbot_assets" MCP server:',
    "- current event: langbot_get_current_event",
    `- conversation history: ${
      canPageHistory(spec.grant)
        ? "langbot_history_page"
        : "not available in this run"
    }`,
    `- knowledge bases (langbot_retrieve_knowledge): ${names(kbs)}`,
    `- tools (langbot_get_tool_detail, langbot_call_tool): ${
      toolsOf((type) => type !== "platform" && type !== "mcp")
    }`,
    `- platform actions (langbot_call_tool): ${
      toolsOf((type) => type === "platform")
    }`,
    `- MCP tools (langbot_call_tool): ${toolsOf((type) => type === "mcp")}`,
  ];
  const skills = (spec.grant.skills ?? []).map((skill) => skill.name);
  if (skills.length > 0) lines.push(`- skills: ${names(skills)}`);
  lines.push(
    "Call langbot_list_assets for details. Follow each tool's input schema exactly and do not add run_id.",
  );
  return lines.join("\n");
}
