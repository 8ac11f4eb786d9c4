/**
 * A conversation's stored runs as the `session/update`s a `session/load`
 * replays to an `/acp` client: each run's prompt, the agent's messages,
 * tool calls and plans, from the store's (redacted) events. Every replayed
 * notification says so in `_meta` (`{"runner": {"replayed": true}}`).
 *
 * @module
 */

import type { SessionUpdate } from "@agentclientprotocol/sdk";
import type { RunEvent } from "../../events.ts";
import type { RunRecord } from "../../store/types.ts";

/** The updates that retell one stored run. */
export function runTranscript(
  record: RunRecord,
  events: RunEvent[],
): SessionUpdate[] {
  const updates: SessionUpdate[] = [];
  if (record.prompt) updates.push(userText(record.prompt));
  for (const event of events) {
    const update = eventUpdate(event);
    if (update) updates.push(update);
  }
  return updates;
}

function eventUpdate(event: RunEvent): SessionUpdate | undefined {
  const data = event.data;
  switch (event.type) {
    case "turn.started":
      return typeof data.text === "string" && data.text
        ? userText(data.text)
        : undefined;
    case "message.completed": {
      const message = data.message as { content?: unknown } | undefined;
      return typeof message?.content === "string" && message.content
        ? {
          sessionUpdate: "agent_message_chunk",
          content: { type: "text", text: message.content },
        }
        : undefined;
    }
    case "tool.call.started":
      return {
        sessionUpdate: "tool_call",
        toolCallId: String(data.tool_call_id ?? ""),
        title: String(data.tool_name ?? "tool"),
        status: "pending",
        ...(data.parameters !== undefined ? { rawInput: data.parameters } : {}),
      };
    case "tool.call.completed":
      return {
        sessionUpdate: "tool_call_update",
        toolCallId: String(data.tool_call_id ?? ""),
        status: data.error !== undefined ? "failed" : "completed",
        ...(data.result !== undefined ? { rawOutput: data.result } : {}),
      };
    case "plan.updated":
      return Array.isArray(data.entries)
        ? { sessionUpdate: "plan", entries: data.entries }
        : undefined;
    default:
      return undefined;
  }
}

function userText(text: string): SessionUpdate {
  return {
    sessionUpdate: "user_message_chunk",
    content: { type: "text", text },
  };
}
