/**
 * Permission rules (`permission-rules-json`): the first rule whose kind,
 * title glob and path glob all match a tool call decides it; no match leaves
 * it to `permission-decision`. The same rules decide permission requests,
 * `fs/write_text_file` and client terminal commands, which are matched on
 * their argv (`command_rules.ts`). See `docs/runs.md`, "Permission rules".
 *
 * @module
 */

import type { PermissionOptionKind as PermissionKind } from "@agentclientprotocol/sdk";
import { isAbsolute, relative, resolve, sep } from "node:path";
import type { PermissionRule } from "../config.ts";
import type { CommandLayers } from "./command_layers.ts";
import { commandMatches, commandPattern } from "./command_rules.ts";
import { globPattern } from "./glob.ts";

export { globPattern };

/** What a rule is matched against. */
export interface RuleSubject {
  /** The tool kind (`other` when the agent names none). */
  kind?: string | null;
  /** The tool call's title. */
  title?: string | null;
  /** The paths it touches (absolute, or relative to the workspace). */
  paths: string[];
  /** For a client terminal's command: what it runs, layer by layer. */
  command?: CommandLayers;
  /**
   * For a command whose program is named by path that is its bare name's
   * file: its line with the bare name, which a rejecting `title` also meets.
   */
  alias?: string;
}

/** The rule that decided, and its decision. */
export interface RuleMatch {
  /** The rule's index in `permission-rules-json` (0-based). */
  index: number;
  /** `ask`, or the permission kind to choose. */
  decision: PermissionKind | "ask";
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
  if (subject.command) {
    if (!commandRuleMatches(rule, subject)) return false;
  } else if (rule.command !== undefined || rule.env !== undefined) {
    return false;
  } else if (
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

/**
 * A terminal command against a rule's `command`/`env`, or its `title` read
 * as words; a `title` that rejects or asks also matches the command line
 * (or its alias) as before.
 */
function commandRuleMatches(rule: PermissionRule, subject: RuleSubject) {
  const command = subject.command!;
  const pattern = commandPattern(rule);
  if (pattern === undefined && rule.title === undefined) return true;
  const allows = ruleDecision(rule.decision).startsWith("allow");
  if (pattern && commandMatches(pattern, command, allows)) return true;
  if (rule.command !== undefined || allows || rule.title === undefined) {
    return false;
  }
  const line = globPattern(rule.title);
  return [subject.title, subject.alias].some((title) =>
    title !== undefined && title !== null && line.test(title)
  );
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
