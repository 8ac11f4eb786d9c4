/**
 * The optional `terminal/*` client capability: the agent asks the client to
 * run a command and reads its output. Advertised only when enabled
 * (`client-terminals`); the handlers here only speak ACP and hand every call
 * to a {@linkcode TerminalHost}, which decides, spawns and reports (the run's
 * terminal set, `lib/run/terminals.ts`).
 *
 * @module
 */

import * as acp from "@agentclientprotocol/sdk";
import type {
  CreateTerminalRequest,
  TerminalExitStatus,
  TerminalOutputResponse,
} from "@agentclientprotocol/sdk";

/** Who runs the agent's terminal commands. */
export interface TerminalHost {
  /**
   * Decides and starts a command; resolves with its terminal id once it
   * runs. Rejects with a `RequestError` for a refused command.
   */
  create(params: CreateTerminalRequest): Promise<string>;
  /** The output so far, and the exit status once it exited. */
  output(terminalId: string): TerminalOutputResponse;
  /** Resolves with the exit status once the command exited. */
  waitForExit(terminalId: string): Promise<TerminalExitStatus>;
  /** Kills the command; its output and exit status stay readable. */
  kill(terminalId: string): Promise<void>;
  /** Kills the command (if still running) and forgets the terminal. */
  release(terminalId: string): Promise<void>;
}

/** The agent named a terminal that does not exist (or was released). */
export function unknownTerminal(terminalId: string): acp.RequestError {
  return acp.RequestError.resourceNotFound(terminalId);
}

/** Adds the `terminal/*` handlers to a client app, all served by `host`. */
export function terminalHandlers(
  app: acp.ClientApp,
  host: TerminalHost,
): acp.ClientApp {
  const { terminal } = acp.methods.client;
  return app
    .onRequest(terminal.create, async ({ params }) => ({
      terminalId: await host.create(params),
    }))
    .onRequest(terminal.output, ({ params }) => host.output(params.terminalId))
    .onRequest(terminal.waitForExit, async ({ params }) => {
      const status = await host.waitForExit(params.terminalId);
      return { exitCode: status.exitCode, signal: status.signal };
    })
    .onRequest(terminal.kill, async ({ params }) => {
      await host.kill(params.terminalId);
      return {};
    })
    .onRequest(terminal.release, async ({ params }) => {
      await host.release(params.terminalId);
      return {};
    });
}
