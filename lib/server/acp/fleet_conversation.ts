/**
 * An `/acp` session's conversation in a fleet: its prompts run on the replica
 * holding the client's connection, so before each prompt that replica takes
 * the conversation (its follow-ups on `/v1`, cancels and deletes are then
 * forwarded there), unless another live replica is running a turn of it
 * right now. See `docs/acp-endpoint.md` ("In a fleet").
 *
 * @module
 */

import { RunnerError } from "../../errors.ts";
import type { ServerContext } from "../context.ts";

/**
 * In a fleet: makes this replica the owner of conversation `sessionId`
 * before a prompt runs here; refuses with `http.conversation_busy` while a
 * turn of it runs on another live replica. Outside a fleet: nothing.
 */
export async function takeConversation(
  ctx: ServerContext,
  sessionId: string,
): Promise<void> {
  const fleet = ctx.fleet?.fleet;
  if (!fleet) return;
  try {
    const [latest] = await ctx.store.listRuns({
      conversationId: sessionId,
      limit: 1,
    });
    const running = latest?.status === "active"
      ? await fleet.activeRunOwner(latest.runId)
      : undefined;
    if (running && running.alive && !running.self) {
      throw new RunnerError(
        "http.conversation_busy",
        `Session ${sessionId} has a turn running on replica ${running.replicaId}; prompt again once it has ended, or cancel it on the connection that started it.`,
      );
    }
    await fleet.claimConversation(sessionId, { force: true });
  } catch (error) {
    if (error instanceof RunnerError) throw error;
    throw new RunnerError(
      "store.unavailable",
      `The fleet's database did not answer (${
        error instanceof Error ? error.message : error
      }); retry shortly, or check PostgreSQL at --store.`,
      { cause: error },
    );
  }
}
