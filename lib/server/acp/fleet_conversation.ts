/**
 * An `/acp` session's conversation in a fleet: its prompts run on the replica
 * holding the client's connection, so before each prompt that replica takes
 * the conversation (its follow-ups on `/v1`, cancels and deletes are then
 * forwarded there), unless another live replica is running a turn of it
 * right now; a `session/cancel` reaches the turn wherever it runs. See
 * `docs/acp-endpoint.md` ("In a fleet").
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
  const active = await activeRunOf(ctx, sessionId);
  const running = active
    ? await fleetLookup(fleet.activeRunOwner(active))
    : undefined;
  if (running && running.alive && !running.self) {
    throw new RunnerError(
      "http.conversation_busy",
      `Session ${sessionId} has a turn running on replica ${running.replicaId}; prompt again once it has ended, or cancel it (session/cancel).`,
    );
  }
  await fleetLookup(fleet.claimConversation(sessionId, { force: true }));
}

/** The id of conversation `sessionId`'s active run in the store, if its latest run is one. */
async function activeRunOf(
  ctx: ServerContext,
  sessionId: string,
): Promise<string | undefined> {
  const [latest] = await fleetLookup(ctx.store.listRuns({
    conversationId: sessionId,
    limit: 1,
  }));
  return latest?.status === "active" ? latest.runId : undefined;
}

/**
 * `session/cancel`: cancels conversation `sessionId`'s active turn, here or,
 * in a fleet, on the live replica running it (as a forwarded
 * `POST /v1/runs/:id/cancel`). A turn that is not running anywhere is left
 * alone; a replica that cannot be reached is logged (a notification has no
 * answer).
 */
export async function cancelTurn(
  ctx: ServerContext,
  sessionId: string,
): Promise<void> {
  const here = ctx.manager.activeForConversation(sessionId);
  if (here || !ctx.fleet) {
    here?.handle.cancel();
    return;
  }
  try {
    const active = await activeRunOf(ctx, sessionId);
    if (active) await ctx.fleet.cancelOnOwner(active);
  } catch (error) {
    ctx.log?.({
      level: "warn",
      msg: "acp session/cancel did not reach the replica running the turn",
      conversation_id: sessionId,
      error: error instanceof Error ? error.message : String(error),
    });
  }
}
