/**
 * The modules `deno task mutate` mutates by default — the code that keeps
 * people out or keeps promises to peers — each with the test files that run
 * against its mutants (its boundary's tests that exercise it, so one module
 * takes minutes, not the hours of a whole folder on a loaded machine).
 * See `docs/testing.md`, "Mutation testing".
 *
 * @module
 */

/** One mutated module and the tests run for each of its mutants. */
export interface MutationModule {
  /** The source file, from the repository root. */
  module: string;
  /** Test files (from the root) run per mutant. */
  tests: string[];
}

/** The guard modules, by what they guard. */
export const GUARD_MODULES: MutationModule[] = [
  // The sandbox plan and its checks.
  {
    module: "lib/agent/sandbox.ts",
    tests: [
      "tests/agent/sandbox_plan_test.ts",
      "tests/agent/sandbox_host_files_test.ts",
      "tests/agent/sandbox_cli_test.ts",
    ],
  },
  // The caller policy and the operator floors (serve, n8n, daemon).
  {
    module: "lib/server/policy.ts",
    tests: [
      "tests/server/policy_test.ts",
      "tests/security/caller_floor_rules_test.ts",
      "tests/security/caller_floor_test.ts",
      "tests/server/serve_auth_test.ts",
      "tests/server/serve_config_hardening_test.ts",
    ],
  },
  {
    module: "lib/run/permission_floor.ts",
    tests: [
      "tests/run/permission_floor_table_test.ts",
      "tests/run/permission_floor_test.ts",
    ],
  },
  {
    module: "lib/server/n8n/auth.ts",
    tests: [
      "tests/server/n8n_auth_refusals_test.ts",
      "tests/contracts/guards_test.ts",
      "tests/server/serve_auth_combinations_test.ts",
    ],
  },
  {
    module: "lib/relay/payload.ts",
    tests: [
      "tests/relay/payload_test.ts",
    ],
  },
  // Permission rules and the permission desk.
  {
    module: "lib/run/permission_rules.ts",
    tests: [
      "tests/run/permission_rules_match_test.ts",
      "tests/security/terminal_argv_test.ts",
    ],
  },
  {
    module: "lib/run/permission_policy.ts",
    tests: [
      "tests/run/permission_policy_test.ts",
      "tests/run/permission_rules_test.ts",
      "tests/run/run_cancel_test.ts",
    ],
  },
  {
    module: "lib/run/permission_desk.ts",
    tests: ["tests/run/permission_desk_test.ts"],
  },
  // The terminal host: argv matching, env checks, limits, teardown.
  {
    module: "lib/run/terminal_command.ts",
    tests: [
      "tests/run/terminal_command_test.ts",
      "tests/security/terminal_argv_test.ts",
    ],
  },
  {
    module: "lib/run/command_layers.ts",
    tests: ["tests/run/command_layers_test.ts"],
  },
  {
    module: "lib/run/terminals.ts",
    tests: [
      "tests/run/terminals_test.ts",
      "tests/daemon/daemon_terminal_redaction_test.ts",
    ],
  },
  {
    module: "lib/acp/terminals.ts",
    tests: ["tests/acp/terminals_test.ts"],
  },
  {
    module: "lib/acp/terminal_output.ts",
    tests: ["tests/acp/terminal_output_test.ts"],
  },
  // fs/* confinement.
  {
    module: "lib/acp/fs.ts",
    tests: ["tests/acp/fs_test.ts", "tests/run/run_fs_test.ts"],
  },
  // Redaction and the secrets list.
  {
    module: "lib/secrets.ts",
    tests: ["tests/secrets_test.ts"],
  },
  // Auth and token checks, Host/Origin checks.
  {
    module: "lib/server/request_guard.ts",
    tests: [
      "tests/server/request_guard_test.ts",
      "tests/contracts/guards_test.ts",
    ],
  },
  {
    module: "lib/server/fleet_router.ts",
    tests: ["tests/contracts/guards_test.ts", "tests/store/fleet_test.ts"],
  },
  {
    module: "lib/hub/token_rules.ts",
    tests: [
      "tests/hub/token_rules_test.ts",
      "tests/contracts/guards_test.ts",
      "tests/server/serve_config_hardening_test.ts",
    ],
  },
  // The fleet's lease and fencing writes.
  {
    module: "lib/store/postgres/fencing.ts",
    tests: ["tests/store/fleet_lapsed_writes_test.ts"],
  },
  {
    module: "lib/store/postgres/fleet.ts",
    tests: [
      "tests/store/store_postgres_test.ts",
      "tests/store/fleet_lapsed_writes_test.ts",
    ],
  },
  // The relay codec's contract fitting.
  {
    module: "lib/relay/event_fit.ts",
    tests: [
      "tests/relay/event_fit_test.ts",
      "tests/contracts/contracts_test.ts",
      "tests/relay/relay_transcripts_test.ts",
    ],
  },
  // Event numbering and durability.
  {
    module: "lib/run/recording.ts",
    tests: ["tests/run/recording_test.ts", "tests/run/recording_fleet_test.ts"],
  },
  {
    module: "lib/store/event_queue.ts",
    tests: [
      "tests/store/event_queue_test.ts",
      "tests/store/event_queue_retry_test.ts",
    ],
  },
  // The HTTP, body and WebSocket limits.
  {
    module: "lib/server/body_limit.ts",
    tests: ["tests/server/body_limit_test.ts"],
  },
  {
    module: "lib/hub/websocket.ts",
    tests: [
      "tests/hub/websocket_test.ts",
      "tests/hub/websocket_frames_test.ts",
    ],
  },
  {
    module: "lib/hub/ws_listener.ts",
    tests: ["tests/hub/ws_listener_test.ts"],
  },
  {
    module: "lib/net/tcp_listener.ts",
    tests: ["tests/net/tcp_listener_test.ts"],
  },
  // Issue 35's guards: the one caller floor, the file boundary, terminal
  // cwds and argv rules, the sandbox's hardening and network, the API token.
  {
    module: "lib/run/caller_floor.ts",
    tests: [
      "tests/security/caller_floor_rules_test.ts",
      "tests/security/caller_floor_test.ts",
      "tests/project/caller_floor_doc_test.ts",
    ],
  },
  {
    module: "lib/acp/confined_files.ts",
    tests: [
      "tests/acp/confined_files_test.ts",
      "tests/run/run_fs_test.ts",
      "tests/security/fs_names_test.ts",
    ],
  },
  {
    module: "lib/run/terminal_cwd.ts",
    tests: ["tests/run/terminal_cwd_test.ts", "tests/acp/terminals_test.ts"],
  },
  {
    module: "lib/run/command_rules.ts",
    tests: [
      "tests/security/terminal_rule_edges_test.ts",
      "tests/security/terminal_argv_test.ts",
    ],
  },
  {
    module: "lib/agent/sandbox_hardening.ts",
    tests: [
      "tests/agent/sandbox_hardening_test.ts",
      "tests/security/sandbox_escape_test.ts",
    ],
  },
  {
    module: "lib/agent/sandbox_network.ts",
    tests: [
      "tests/agent/sandbox_network_test.ts",
      "tests/security/sandbox_network_test.ts",
    ],
  },
  {
    module: "lib/server/api_auth.ts",
    tests: [
      "tests/server/api_auth_routes_test.ts",
      "tests/server/serve_auth_test.ts",
      "tests/server/serve_auth_combinations_test.ts",
    ],
  },
  // The console's security headers.
  {
    module: "lib/server/console.ts",
    tests: ["tests/server/console_headers_test.ts"],
  },
  // The CLI's signal handling.
  {
    module: "lib/cli/run/signals.ts",
    tests: ["tests/cli/signals_test.ts", "tests/cli/head_start_test.ts"],
  },
];

/**
 * The tests for `module`: its entry in {@linkcode GUARD_MODULES}, else the
 * folder of its boundary (`lib/run/x.ts` → `tests/run/`; a top-level
 * `lib/x.ts` → `tests/x_test.ts`).
 */
export function testsFor(module: string): string[] {
  const known = GUARD_MODULES.find((entry) => entry.module === module);
  if (known) return known.tests;
  const parts = module.replace(/^lib\//, "").split("/");
  if (parts.length === 1) {
    return [`tests/${parts[0].replace(/\.ts$/, "")}_test.ts`];
  }
  return [`tests/${parts[0]}/`];
}
