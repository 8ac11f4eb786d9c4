/**
 * The `mcp-servers-json` config key: the user's extra MCP servers, checked
 * and converted to ACP `mcpServers` entries.
 *
 * @module
 */

import type { McpServer } from "@agentclientprotocol/sdk";
import { RunnerError } from "../errors.ts";
import { ASSETS_MCP_SERVER_NAME } from "./mcp/tools.ts";

/** Which remote MCP transports the agent accepts (its `mcpCapabilities`). */
export interface McpTransportCaps {
  /** `mcpCapabilities.http`. */
  http: boolean;
  /** `mcpCapabilities.sse`. */
  sse: boolean;
}

const STDIO_KEYS = ["name", "type", "command", "args", "env"];
const REMOTE_KEYS = ["name", "type", "url", "headers"];

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Converts `{K: "v"}` or `[{name, value}]` to ACP `[{name, value}]`. */
function namedValues(
  value: unknown,
  field: string,
): { ok: true; list: { name: string; value: string }[] } | {
  ok: false;
  problem: string;
} {
  if (value === undefined) return { ok: true, list: [] };
  const pairs = isRecord(value)
    ? Object.entries(value).map(([name, v]) => ({ name, value: v }))
    : Array.isArray(value)
    ? value.map((item) =>
      isRecord(item)
        ? { name: item.name, value: item.value }
        : { name: undefined, value: undefined }
    )
    : undefined;
  if (!pairs) {
    return {
      ok: false,
      problem: `${field} must be an object or a list of {name, value}`,
    };
  }
  const list: { name: string; value: string }[] = [];
  for (const pair of pairs) {
    if (typeof pair.name !== "string" || pair.name === "") {
      return {
        ok: false,
        problem: `every ${field} entry needs a non-empty string name`,
      };
    }
    if (typeof pair.value !== "string") {
      return {
        ok: false,
        problem: `${field} ${
          JSON.stringify(pair.name)
        } must have a string value`,
      };
    }
    list.push({ name: pair.name, value: pair.value });
  }
  return { ok: true, list };
}

function convertEntry(
  entry: Record<string, unknown>,
  caps: McpTransportCaps,
): { ok: true; server: McpServer } | { ok: false; problem: string } {
  const type = entry.type ??
    (entry.command !== undefined ? "stdio" : undefined);
  if (type === undefined) {
    return {
      ok: false,
      problem: 'needs "command" (stdio) or "type": "http"/"sse" with "url"',
    };
  }
  if (type !== "stdio" && type !== "http" && type !== "sse") {
    return {
      ok: false,
      problem: `type must be "stdio", "http" or "sse", not ${
        JSON.stringify(type)
      }`,
    };
  }
  const allowed = type === "stdio" ? STDIO_KEYS : REMOTE_KEYS;
  const unknown = Object.keys(entry).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) {
    return {
      ok: false,
      problem: `unknown field(s) ${
        unknown.join(", ")
      } for a ${type} server (allowed: ${allowed.join(", ")})`,
    };
  }
  const name = entry.name as string;
  if (type === "stdio") {
    if (typeof entry.command !== "string" || entry.command.trim() === "") {
      return { ok: false, problem: "command must be a non-empty string" };
    }
    if (
      entry.args !== undefined &&
      (!Array.isArray(entry.args) ||
        !entry.args.every((a) => typeof a === "string"))
    ) {
      return { ok: false, problem: "args must be a list of strings" };
    }
    const env = namedValues(entry.env, "env");
    if (!env.ok) return env;
    return {
      ok: true,
      server: {
        name,
        command: entry.command,
        args: (entry.args as string[]) ?? [],
        env: env.list,
      },
    };
  }
  if (!caps[type]) {
    return {
      ok: false,
      problem:
        `the agent does not support ${type} MCP servers (mcpCapabilities.${type} is false); ` +
        "use a stdio server or an agent that supports it",
    };
  }
  let url: URL | undefined;
  try {
    url = typeof entry.url === "string" ? new URL(entry.url) : undefined;
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) {
    return { ok: false, problem: "url must be an http:// or https:// URL" };
  }
  const headers = namedValues(entry.headers, "headers");
  if (!headers.ok) return headers;
  return {
    ok: true,
    server: { type, name, url: entry.url as string, headers: headers.list },
  };
}

/**
 * Parses `mcp-servers-json`: a JSON array of servers, or `{"mcpServers":
 * {name: server}}`. Stdio `{name, command, args?, env?}` and, when the agent
 * allows them, `{type: "http"|"sse", name, url, headers?}`; `env`/`headers`
 * may be objects or `[{name, value}]`. Empty text means no servers.
 * Throws one `config.invalid` error listing every bad entry.
 */
export function parseMcpServersJson(
  text: string,
  caps: McpTransportCaps,
): McpServer[] {
  if (text.trim() === "") return [];
  const fail = (problems: string[]) =>
    new RunnerError(
      "config.invalid",
      `mcp-servers-json is invalid: ${
        problems.join("; ")
      }. Fix the value and start the run again.`,
      { detail: { key: "mcp-servers-json", problems } },
    );
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw fail(["it is not valid JSON"]);
  }
  let entries: { label: string; entry: unknown; name?: string }[];
  if (Array.isArray(parsed)) {
    entries = parsed.map((entry, index) => ({
      label: `entry ${index + 1}`,
      entry,
    }));
  } else if (isRecord(parsed) && isRecord(parsed.mcpServers)) {
    entries = Object.entries(parsed.mcpServers).map(([name, entry]) => ({
      label: `server ${JSON.stringify(name)}`,
      entry,
      name,
    }));
  } else {
    throw fail(['it must be a JSON array of servers or {"mcpServers": {...}}']);
  }
  const problems: string[] = [];
  const servers: McpServer[] = [];
  const seen = new Set<string>();
  for (const { label, entry, name } of entries) {
    if (!isRecord(entry)) {
      problems.push(`${label}: must be an object`);
      continue;
    }
    const withName = name === undefined
      ? entry
      : { ...entry, name: entry.name ?? name };
    const serverName = withName.name;
    const where = typeof serverName === "string" && name === undefined
      ? `${label} (${JSON.stringify(serverName)})`
      : label;
    if (typeof serverName !== "string" || serverName.trim() === "") {
      problems.push(`${where}: name must be a non-empty string`);
      continue;
    }
    if (serverName === ASSETS_MCP_SERVER_NAME) {
      problems.push(
        `${where}: the name ${ASSETS_MCP_SERVER_NAME} is reserved for LangBot assets`,
      );
      continue;
    }
    if (seen.has(serverName)) {
      problems.push(`${where}: the name is used twice`);
      continue;
    }
    seen.add(serverName);
    const converted = convertEntry(withName, caps);
    if (converted.ok) servers.push(converted.server);
    else problems.push(`${where}: ${converted.problem}`);
  }
  if (problems.length > 0) throw fail(problems);
  return servers;
}
