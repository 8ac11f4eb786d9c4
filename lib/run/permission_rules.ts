/**
 * Permission rules (`permission-rules-json`): the first rule whose kind,
 * title glob and path glob all match a tool call decides it; no match leaves
 * it to `permission-decision`. The same rules decide permission requests and
 * `fs/write_text_file`. See `docs/runs.md`, "Permission rules".
 *
 * @module
 */

import type { PermissionOptionKind as PermissionKind } from "@agentclientprotocol/sdk";
import { isAbsolute, relative, resolve, sep } from "node:path";
import type { PermissionRule } from "../config.ts";

/** What a rule is matched against. */
export interface RuleSubject {
  /** The tool kind (`other` when the agent names none). */
  kind?: string | null;
  /** The tool call's title. */
  title?: string | null;
  /** The paths it touches (absolute, or relative to the workspace). */
  paths: string[];
}

/** The rule that decided, and its decision. */
export interface RuleMatch {
  /** The rule's index in `permission-rules-json` (0-based). */
  index: number;
  /** `ask`, or the permission kind to choose. */
  decision: PermissionKind | "ask";
}

/** A glob as a regular expression: `**` crosses `/`, `*` and `?` do not. */
export function globPattern(glob: string): RegExp {
  let source = "";
  for (let i = 0; i < glob.length; i++) {
    const char = glob[i];
    if (char === "*" && glob[i + 1] === "*") {
      i++;
      if (glob[i + 1] === "/") {
        i++;
        source += "(?:.*/)?";
      } else source += ".*";
    } else if (char === "*") source += "[^/]*";
    else if (char === "?") source += "[^/]";
    else source += char.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`, "s");
}

/** A path as the rules see it: relative to the workspace, `/`-separated. */
function workspacePath(root: string, path: string): string {
  const full = isAbsolute(path) ? path : resolve(root, path);
  return relative(root, full).split(sep).join("/") || ".";
}

function matches(
  rule: PermissionRule,
  subject: RuleSubject,
  root: string,
): boolean {
  if (rule.kind !== undefined) {
    const kinds = Array.isArray(rule.kind) ? rule.kind : [rule.kind];
    if (!kinds.includes(subject.kind || "other")) return false;
  }
  if (
    rule.title !== undefined &&
    !globPattern(rule.title).test(subject.title ?? "")
  ) return false;
  if (rule.path !== undefined) {
    const pattern = globPattern(rule.path);
    if (!subject.paths.some((p) => pattern.test(workspacePath(root, p)))) {
      return false;
    }
  }
  return true;
}

/** The permission kind (or `ask`) a rule's decision means. */
export function ruleDecision(decision: string): PermissionKind | "ask" {
  if (decision === "allow") return "allow_once";
  if (decision === "reject") return "reject_once";
  return decision as PermissionKind | "ask";
}

/** The first rule matching `subject`, or undefined. */
export function matchRule(
  rules: readonly PermissionRule[],
  subject: RuleSubject,
  root: string,
): RuleMatch | undefined {
  const index = rules.findIndex((rule) => matches(rule, subject, root));
  if (index < 0) return undefined;
  return { index, decision: ruleDecision(rules[index].decision) };
}
