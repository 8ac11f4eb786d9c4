/**
 * The run request's `assets` field: its validation and the secrets it
 * carries (redacted from everything the run reports). See `docs/assets.md`.
 *
 * @module
 */

import type { AssetGrant, InlineAssets } from "./grant.ts";
import { RunnerError } from "../errors.ts";

/** What a run request says about the run's LangBot assets. */
export interface RunAssetsRequest {
  /** The LangBot event that started the run. */
  event?: Record<string, unknown>;
  /** The authorization snapshot (on the wire `knowledge_bases` is accepted too). */
  grant?: AssetGrant;
  /** Source: an upstream MCP endpoint; `headers` never reach the agent. */
  upstream?: { url: string; headers?: Record<string, string> };
  /** Source: an HTTP callback signed with the per-run `secret` (never shown to the agent). */
  callback?: { url: string; secret: string };
  /** Source: read-only data supplied with the run. */
  inline?: InlineAssets;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

type Problems = string[];

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function present(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function checkKeys(
  value: Record<string, unknown>,
  path: string,
  allowed: string[],
  problems: Problems,
): void {
  const unknown = Object.keys(value).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    problems.push(
      `${path} has unknown field(s) ${unknown.join(", ")} (allowed: ${
        allowed.join(", ")
      })`,
    );
  }
}

function record(
  value: unknown,
  path: string,
  problems: Problems,
): Record<string, unknown> | undefined {
  if (!present(value)) return undefined;
  if (isRecord(value)) return value;
  problems.push(`${path} must be an object`);
  return undefined;
}

function text(
  value: unknown,
  path: string,
  problems: Problems,
  required = false,
): string | undefined {
  if (!present(value)) {
    if (required) problems.push(`${path} is required`);
    return undefined;
  }
  if (typeof value === "string" && (!required || value.trim() !== "")) {
    return value;
  }
  problems.push(`${path} must be a${required ? " non-empty" : ""} string`);
  return undefined;
}

function texts(
  value: unknown,
  path: string,
  problems: Problems,
): string[] | undefined {
  if (!present(value)) return undefined;
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) {
    return value;
  }
  problems.push(`${path} must be a list of strings`);
  return undefined;
}

function list(value: unknown, path: string, problems: Problems): unknown[] {
  if (!present(value)) return [];
  if (Array.isArray(value)) return value;
  problems.push(`${path} must be a list`);
  return [];
}

function httpUrl(value: unknown, path: string, problems: Problems): string {
  const url = text(value, path, problems, true) ?? "";
  if (url === "") return url;
  try {
    const protocol = new URL(url).protocol;
    if (protocol === "http:" || protocol === "https:") return url;
  } catch { /* reported below */ }
  problems.push(`${path} must be an http:// or https:// URL`);
  return url;
}

function compact<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(
    Object.entries(value).filter(([, inner]) => inner !== undefined),
  ) as T;
}

function unique<T>(
  items: T[],
  key: (item: T) => string,
  path: string,
  problems: Problems,
): T[] {
  const seen = new Set<string>();
  for (const item of items) {
    const name = key(item);
    if (seen.has(name)) problems.push(`${path}: ${name} is listed twice`);
    seen.add(name);
  }
  return items;
}

function readGrant(value: unknown, problems: Problems): AssetGrant | undefined {
  const raw = record(value, "assets.grant", problems);
  if (!raw) return undefined;
  checkKeys(raw, "assets.grant", [
    "history",
    "knowledge_bases",
    "knowledgeBases",
    "tools",
    "skills",
  ], problems);
  if (present(raw.knowledge_bases) && present(raw.knowledgeBases)) {
    problems.push(
      "assets.grant has both knowledge_bases and knowledgeBases; give one",
    );
  }
  const grant: AssetGrant = {};
  if (present(raw.history)) {
    if (typeof raw.history === "boolean") grant.history = raw.history;
    else problems.push("assets.grant.history must be true or false");
  }
  const kbRaw = present(raw.knowledge_bases)
    ? raw.knowledge_bases
    : raw.knowledgeBases;
  if (present(kbRaw)) {
    grant.knowledgeBases = readGrantKnowledgeBases(kbRaw, problems);
  }
  if (present(raw.tools)) grant.tools = readGrantTools(raw.tools, problems);
  if (present(raw.skills)) {
    grant.skills = list(raw.skills, "assets.grant.skills", problems).map(
      (entry, index) => {
        const path = `assets.grant.skills[${index}]`;
        const skill = record(entry, path, problems) ?? {};
        text(skill.name, `${path}.name`, problems, true);
        return skill as { name: string };
      },
    );
  }
  return grant;
}

function readGrantKnowledgeBases(
  value: unknown,
  problems: Problems,
): AssetGrant["knowledgeBases"] {
  const kbs = list(value, "assets.grant.knowledge_bases", problems).map(
    (entry, index) => {
      const path = `assets.grant.knowledge_bases[${index}]`;
      const kb = record(entry, path, problems) ?? {};
      checkKeys(kb, path, ["kb_id", "name", "type", "operations"], problems);
      return compact({
        kb_id: text(kb.kb_id, `${path}.kb_id`, problems, true) ?? "",
        name: text(kb.name, `${path}.name`, problems),
        type: text(kb.type, `${path}.type`, problems),
        operations: texts(kb.operations, `${path}.operations`, problems),
      });
    },
  );
  return unique(
    kbs,
    (kb) => kb.kb_id,
    "assets.grant.knowledge_bases",
    problems,
  );
}

function readGrantTools(
  value: unknown,
  problems: Problems,
): AssetGrant["tools"] {
  const tools = list(value, "assets.grant.tools", problems).map(
    (entry, index) => {
      const path = `assets.grant.tools[${index}]`;
      const tool = record(entry, path, problems) ?? {};
      checkKeys(tool, path, [
        "tool_name",
        "type",
        "description",
        "operations",
        "schema",
      ], problems);
      return compact({
        tool_name: text(tool.tool_name, `${path}.tool_name`, problems, true) ??
          "",
        type: text(tool.type, `${path}.type`, problems),
        description: text(tool.description, `${path}.description`, problems),
        operations: texts(tool.operations, `${path}.operations`, problems),
        schema: record(tool.schema, `${path}.schema`, problems),
      });
    },
  );
  return unique(
    tools,
    (tool) => tool.tool_name,
    "assets.grant.tools",
    problems,
  );
}

function readInline(value: unknown, problems: Problems): InlineAssets {
  const raw = record(value, "assets.inline", problems) ?? {};
  checkKeys(
    raw,
    "assets.inline",
    ["event", "history", "knowledge", "tools"],
    problems,
  );
  const inline: InlineAssets = {};
  const event = record(raw.event, "assets.inline.event", problems);
  if (event) inline.event = event;
  if (present(raw.history)) {
    inline.history = list(raw.history, "assets.inline.history", problems)
      .map((item, index) =>
        record(item, `assets.inline.history[${index}]`, problems) ?? {}
      );
  }
  if (present(raw.knowledge)) {
    inline.knowledge = list(raw.knowledge, "assets.inline.knowledge", problems)
      .map((entry, index) => {
        const path = `assets.inline.knowledge[${index}]`;
        const kb = record(entry, path, problems) ?? {};
        checkKeys(kb, path, ["kb_id", "snippets"], problems);
        const snippets = list(kb.snippets, `${path}.snippets`, problems).map(
          (item, at) => {
            const where = `${path}.snippets[${at}]`;
            const snippet = record(item, where, problems) ?? {};
            checkKeys(snippet, where, ["text", "score", "metadata"], problems);
            if (present(snippet.score) && typeof snippet.score !== "number") {
              problems.push(`${where}.score must be a number`);
            }
            return {
              text: text(snippet.text, `${where}.text`, problems, true) ?? "",
              ...(present(snippet.score)
                ? { score: snippet.score as number }
                : {}),
              ...(present(snippet.metadata)
                ? {
                  metadata: record(
                    snippet.metadata,
                    `${where}.metadata`,
                    problems,
                  ),
                }
                : {}),
            };
          },
        );
        return {
          kb_id: text(kb.kb_id, `${path}.kb_id`, problems, true) ?? "",
          snippets,
        };
      });
  }
  const tools = record(raw.tools, "assets.inline.tools", problems);
  if (tools) inline.tools = tools;
  return inline;
}

function readUpstream(
  value: unknown,
  problems: Problems,
): RunAssetsRequest["upstream"] {
  const raw = record(value, "assets.upstream", problems) ?? {};
  checkKeys(raw, "assets.upstream", ["url", "headers"], problems);
  const upstream: RunAssetsRequest["upstream"] = {
    url: httpUrl(raw.url, "assets.upstream.url", problems),
  };
  const headers = record(raw.headers, "assets.upstream.headers", problems);
  if (headers) {
    for (const [name, inner] of Object.entries(headers)) {
      if (!HEADER_NAME.test(name)) {
        problems.push(
          `assets.upstream.headers: ${
            JSON.stringify(name)
          } is not a header name`,
        );
      }
      if (typeof inner !== "string" || /[\r\n\0]/.test(inner)) {
        problems.push(
          `assets.upstream.headers.${name} must be a single-line string`,
        );
      }
    }
    upstream.headers = headers as Record<string, string>;
  }
  return upstream;
}

function readCallback(
  value: unknown,
  problems: Problems,
): RunAssetsRequest["callback"] {
  const raw = record(value, "assets.callback", problems) ?? {};
  checkKeys(raw, "assets.callback", ["url", "secret"], problems);
  return {
    url: httpUrl(raw.url, "assets.callback.url", problems),
    secret: text(raw.secret, "assets.callback.secret", problems, true) ?? "",
  };
}

/**
 * Validates a request's `assets` field (absent or null: no assets data).
 * Throws one `config.invalid` naming every problem; values never appear in it.
 */
export function parseRunAssetsRequest(
  value: unknown,
): RunAssetsRequest | undefined {
  if (!present(value)) return undefined;
  const problems: Problems = [];
  const parsed: RunAssetsRequest = {};
  const raw = record(value, "assets", problems);
  if (raw) {
    checkKeys(raw, "assets", [
      "event",
      "grant",
      "upstream",
      "callback",
      "inline",
    ], problems);
    const sources = ["upstream", "callback", "inline"].filter((key) =>
      present(raw[key])
    );
    if (sources.length > 1) {
      problems.push(
        `assets has ${
          sources.join(" and ")
        }; give at most one source (upstream, callback or inline)`,
      );
    }
    const event = record(raw.event, "assets.event", problems);
    if (event) parsed.event = event;
    const grant = readGrant(raw.grant, problems);
    if (grant) parsed.grant = grant;
    if (present(raw.upstream)) {
      parsed.upstream = readUpstream(raw.upstream, problems);
    }
    if (present(raw.callback)) {
      parsed.callback = readCallback(raw.callback, problems);
    }
    if (present(raw.inline)) parsed.inline = readInline(raw.inline, problems);
  }
  if (problems.length > 0) {
    throw new RunnerError(
      "config.invalid",
      `assets is invalid: ${
        problems.join("; ")
      }. Fix the run request's assets field (see docs/assets.md).`,
      { detail: { key: "assets", problems } },
    );
  }
  return parsed;
}

/**
 * The secrets a request's `assets` field carries (upstream header values,
 * the callback secret), for the run's redaction list. Validates like
 * {@linkcode parseRunAssetsRequest}.
 */
export function runAssetsSecrets(value: unknown): string[] {
  const assets = parseRunAssetsRequest(value);
  return [
    ...Object.values(assets?.upstream?.headers ?? {}),
    ...(assets?.callback?.secret ? [assets.callback.secret] : []),
  ];
}
