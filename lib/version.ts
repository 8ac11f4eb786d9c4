/** The runner's version, reported by `--version`, `clientInfo` and daemon metadata. */
export const RUNNER_VERSION = "0.1.0";

/** The ACP protocol version this runner speaks. */
export const ACP_PROTOCOL_VERSION = 1;
