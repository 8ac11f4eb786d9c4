/**
 * Who decides a permission request or a file write: the first matching
 * `permission-rules-json` rule, else `permission-decision`; `ask` goes to a
 * person where one can answer, else `permission-fallback`. Each decision is a
 * `permission.decided` event naming the rule (`rule`: its index, or
 * `"default"` when rules are set and none matched).
 *
 * @module
 */

import type {
  PermissionOptionKind as PermissionKind,
  RequestPermissionRequest,
  RequestPermissionResponse,
} from "@agentclientprotocol/sdk";
import { relative, sep } from "node:path";
import type { RunContext } from "./context.ts";
import { matchRule } from "./permission_rules.ts";
import { answerPermission } from "./permissions.ts";
import { rejectionOf } from "./unanswered.ts";

interface Ruling {
  decision: PermissionKind | "ask";
  rule?: number | "default";
}

function ruling(
  run: RunContext,
  subject: Parameters<typeof matchRule>[1],
): Ruling {
  const rules = run.config.permissionRulesJson ?? [];
  if (!rules.length) return { decision: run.config.permissionDecision };
  const match = matchRule(rules, subject, run.options.sessionCwd);
  return match
    ? { decision: match.decision, rule: match.index }
    : { decision: run.config.permissionDecision, rule: "default" };
}

/** Answers one `session/request_permission` of the run. */
export async function decidePermission(
  run: RunContext,
  request: RequestPermissionRequest,
): Promise<RequestPermissionResponse> {
  const { config } = run;
  const call = request.toolCall;
  const { decision, rule } = ruling(run, {
    kind: call?.kind,
    title: call?.title,
    paths: (call?.locations ?? []).map((location) => location.path),
  });
  const answer = decision === "ask" && run.permissions &&
      !run.abort.signal.aborted
    ? await run.permissions.ask(request, rule)
    : await answerPermission({
      request,
      wanted: decision === "ask" ? config.permissionFallback : decision,
      cancelled: run.abort.signal.aborted,
      emit: run.emitter.emit,
      rule,
    });
  run.rejectedPermission = rejectionOf(request, answer) ??
    run.rejectedPermission;
  return answer;
}

/**
 * Whether the rules let the agent write `path` (`fs/write_text_file`, kind
 * `edit`); only asked when rules are set. `ask` takes `permission-fallback`
 * (a write has no options to offer a person).
 */
export function mayWrite(run: RunContext, path: string): boolean {
  const shown = relative(run.options.sessionCwd, path).split(sep).join("/");
  const title = `fs/write_text_file ${shown}`;
  const { decision, rule } = ruling(run, {
    kind: "edit",
    title,
    paths: [path],
  });
  const kind = decision === "ask" ? run.config.permissionFallback : decision;
  const allowed = kind.startsWith("allow");
  run.emitter.emit("permission.decided", {
    request_id: crypto.randomUUID(),
    tool_call_id: null,
    title,
    outcome: allowed ? "allowed" : "rejected",
    decision: kind,
    by: "policy",
    rule,
    path: shown,
  });
  return allowed;
}
