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
import { fleetLookup } from "../fleet_router.ts";

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
  const [latest] = await fleetLookup(ctx.store.listRuns({
    conversationId: sessionId,
    limit: 1,
  }));
  const running = latest?.status === "active"
    ? await fleetLookup(fleet.activeRunOwner(latest.runId))
    : undefined;
  if (running && running.alive && !running.self) {
    throw new RunnerError(
      "http.conversation_busy",
      `Session ${sessionId} has a turn running on replica ${running.replicaId}; prompt again once it has ended, or cancel it on the connection that started it.`,
    );
  }
  await fleetLookup(fleet.claimConversation(sessionId, { force: true }));
}
