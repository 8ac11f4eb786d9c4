/**
 * Who decides a permission request, a client terminal's command or a file
 * write: the first matching `permission-rules-json` rule, else
 * `permission-decision`; `ask` goes to a person where one can answer, else
 * `permission-fallback`. Each decision is a
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
import { join, relative, sep } from "node:path";
import type { RunContext } from "./context.ts";
import { matchRule } from "./permission_rules.ts";
import { answerPermission } from "./permissions.ts";
import { rejectionOf } from "./unanswered.ts";
import { redactDeep, redactSecrets } from "../secrets.ts";
import type { CheckedCommand } from "./terminal_command.ts";

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
export function decidePermission(
  run: RunContext,
  request: RequestPermissionRequest,
): Promise<RequestPermissionResponse> {
  const call = request.toolCall;
  return decide(run, request, {
    kind: call?.kind,
    title: call?.title,
    paths: (call?.locations ?? []).map((location) => location.path),
  });
}

/** The rules, then the policy, then a person where one can answer. */
async function decide(
  run: RunContext,
  request: RequestPermissionRequest,
  subject: Parameters<typeof matchRule>[1],
): Promise<RequestPermissionResponse> {
  const { config } = run;
  const { decision, rule } = ruling(run, subject);
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
  // The tool's title is redacted before the failure's text cuts it.
  const toolCall = redactDeep(request.toolCall, run.secrets);
  run.rejectedPermission = rejectionOf({ ...request, toolCall }, answer) ??
    run.rejectedPermission;
  return answer;
}

/** A command a client terminal is about to run (`terminal/create`). */
export interface TerminalCommand extends CheckedCommand {
  /** The terminal id it would get. */
  terminalId: string;
  /** Its working directory, relative to the workspace (`.` for the root). */
  cwd: string;
}

const RUN_OPTION = "run";

/**
 * Whether the run's policy lets a client terminal run `call`, decided like a
 * permission request of kind `execute` on its argv, layer by layer
 * (`command_rules.ts`), shown with the command line as its title (the
 * request's variables first), and whose path is its cwd; `ask` offers a
 * person "Run" or "Don't run". The decision is a `permission.decided` event, its
 * title and input with the run's secrets redacted.
 */
export async function mayRunCommand(
  run: RunContext,
  call: TerminalCommand,
): Promise<boolean> {
  const hide = (text: string) => redactSecrets(text, run.secrets);
  const title = hide(call.title);
  const request: RequestPermissionRequest = {
    sessionId: run.sessionId ?? "",
    toolCall: {
      toolCallId: `terminal-${call.terminalId}`,
      kind: "execute",
      title,
      status: "pending",
      rawInput: {
        command: hide(call.command),
        program: hide(call.program),
        args: call.args.map(hide),
        env: Object.fromEntries(
          call.env.map((entry) => [entry.name, hide(entry.value)]),
        ),
        cwd: hide(call.cwd),
      },
    },
    options: [
      { optionId: RUN_OPTION, name: "Run", kind: "allow_once" },
      { optionId: "dont-run", name: "Don't run", kind: "reject_once" },
    ],
  };
  const answer = await decide(run, request, {
    kind: "execute",
    title: call.title,
    paths: [join(run.options.sessionCwd, call.cwd)],
    command: call.layers,
    alias: call.alias,
  });
  return answer.outcome.outcome === "selected" &&
    answer.outcome.optionId === RUN_OPTION;
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
