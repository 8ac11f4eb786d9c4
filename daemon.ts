/**
 * `runner daemon`: runs jobs from a hub on this machine. It dials out to the
 * hub over a WebSocket (coding-relay-v1), so it works behind NAT.
 *
 * @module
 */

/** Runs `runner daemon`; returns the exit code. */
export function daemonCommand(args: string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(
      "Usage: runner daemon --url ws://HOST:PORT --daemon-id ID --token T\n\n(not implemented yet)",
    );
    return Promise.resolve(0);
  }
  console.error("runner daemon: not implemented yet in this build.");
  return Promise.resolve(2);
}
