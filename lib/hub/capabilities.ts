/**
 * Optional coding-relay-v1 capabilities: a daemon lists what it supports in
 * its hello metadata (`capabilities`); the hub confirms the ones it supports
 * too. Peers that list nothing (LangBot's Python hub and `daemon.py`) get
 * exactly the base protocol.
 *
 * @module
 */

import {
  type JsonObject,
  PERMISSION_ASK_CAPABILITY,
  SESSION_UPDATE_CAPABILITY,
} from "../relay.ts";

/** The optional capabilities this hub supports. */
export const HUB_CAPABILITIES: readonly string[] = [
  PERMISSION_ASK_CAPABILITY,
  SESSION_UPDATE_CAPABILITY,
];

/**
 * The capabilities both a daemon (by its hello metadata) and this hub
 * support; undefined when the daemon announced none (send nothing extra).
 */
export function sharedCapabilities(
  metadata: JsonObject,
): string[] | undefined {
  const announced = metadata.capabilities;
  if (!Array.isArray(announced)) return undefined;
  return HUB_CAPABILITIES.filter((capability) =>
    announced.includes(capability)
  );
}
