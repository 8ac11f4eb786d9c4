/**
 * Re-checks the "must catch" cases of `docs/testing.md`: for each, it makes
 * the break by hand in the source (one exact text replacement), runs the test
 * that must catch it, and puts the source back. A case passes when that test
 * fails. Usage: `deno run -A scripts/must_catch.ts [case name …]` on a clean
 * checkout (it refuses to touch a file with uncommitted changes).
 *
 * @module
 */

/** One break and the test that must catch it. */
export interface MustCatch {
  /** Short name (as in docs/testing.md). */
  name: string;
  /** The source file the break edits. */
  file: string;
  /** Text that occurs exactly once in `file`. */
  find: string;
  /** What it becomes. */
  replace: string;
  /** The test file to run. */
  test: string;
  /** `deno test --filter` for the test that must fail. */
  filter: string;
}

/** The cases, in the order of docs/testing.md. */
export const MUST_CATCH: MustCatch[] = [
  {
    name: "env-json under the inherited environment",
    file: "lib/agent/env.ts",
    find: "return { ...env, ...(options.overlay ?? {}) };",
    replace: "return { ...(options.overlay ?? {}), ...env };",
    test: "tests/agent/env_test.ts",
    filter: "allow-listed env",
  },
  {
    name: "session/load preferred over session/resume",
    file: "lib/run/session.ts",
    find: "        if (canResume) {",
    replace: "        if (canResume && !canLoad) {",
    test: "tests/run/session_test.ts",
    filter: "preferring session/resume",
  },
  {
    name: "reaper pid-reuse check off",
    file: "lib/agent/reaper.ts",
    find: "const leaderReused = leaderStart",
    replace: "const leaderReused = false && leaderStart",
    test: "tests/agent/reaper_test.ts",
    filter: "reused a recorded pid",
  },
  {
    name: "reaper kills a live runner's agents",
    file: "lib/agent/reaper.ts",
    find: "if (await ownerAlive(record)) return undefined;",
    replace: "",
    test: "tests/agent/reaper_test.ts",
    filter: "live runner",
  },
  {
    name: "runner variables with secret-looking names not redacted",
    file: "lib/secrets.ts",
    find: "      ...Object.entries(options.environment ?? {}),\n",
    replace: "",
    test: "tests/agent/env_test.ts",
    filter: "runner variable",
  },
  {
    name: "env-json exported on the ssh command line",
    file: "lib/locations/ssh.ts",
    find: "return `bash -lc ${quoteWord(remoteScript(workspace, launch))}`;",
    replace:
      "return `bash -lc ${quoteWord(Object.entries(config.envJson).map(([k, v]) => `export ${k}=${quoteWord(v)}\\n`).join('') + remoteScript(workspace, launch))}`;",
    test: "tests/locations/ssh_test.ts",
    filter: "a run streams over a real sshd",
  },
  {
    name: "run.completed before teardown",
    file: "lib/run/engine.ts",
    find: "  await finishAgent(run);\n  // The answer is the last turn's",
    replace: "  void finishAgent;\n  // The answer is the last turn's",
    test: "tests/run/engine_test.ts",
    filter: "terminal event comes after teardown",
  },
  {
    name: "ssh -R port collision not retried",
    file: "lib/locations/ssh.ts",
    find: "    if (attempt === FORWARD_ATTEMPTS) {",
    replace: "    if (attempt >= 1) {",
    test: "tests/locations/ssh_test.ts",
    filter: "already taken",
  },
  {
    name: "ssh -R retried without bound",
    file: "lib/locations/ssh.ts",
    find: "    if (attempt === FORWARD_ATTEMPTS) {",
    replace: "    if (attempt === FORWARD_ATTEMPTS + 1) {",
    test: "tests/locations/ssh_mcp_transport_test.ts",
    filter: "taken on every try",
  },
  {
    name: "a refused ssh -R not reported as assets.tunnel_refused",
    file: "lib/locations/ssh.ts",
    find: "  return refused ? Number(refused[1]) : undefined;",
    replace: "  return undefined;",
    test: "tests/locations/ssh_mcp_transport_test.ts",
    filter: "forwarding refused: the ssh -R tunnel fails",
  },
  {
    name: "an ssh launch with tunnels ignores cancel and start-up timeout",
    file: "lib/locations/remote_ssh.ts",
    find: "    registry: context.registry,\n    signal,\n",
    replace: "    registry: context.registry,\n",
    test: "tests/locations/ssh_test.ts",
    filter: "never reports in",
  },
  {
    name:
      "an agent started before its assets endpoint outlives the endpoint's failure",
    file: "lib/locations/local.ts",
    find: "    prepared?.release();\n    await transport.teardown();\n",
    replace: "    prepared?.release();\n",
    test: "tests/cli/run_cli_test.ts",
    filter: "assets endpoint that cannot start",
  },
  {
    name: "a refused runner run leaves the agent it started ahead",
    file: "lib/cli/run/command.ts",
    find: "    await ahead?.discard();\n",
    replace: "",
    test: "tests/cli/run_cli_test.ts",
    filter: "refused after its agent was started ahead",
  },
  {
    name: "a closed run still takes follow-ups",
    file: "lib/run/steering.ts",
    find: "if (run.closed || !conversationId)",
    replace: "if (!conversationId)",
    test: "tests/run/steering_test.ts",
    filter: "after the queue closed",
  },
  {
    name: "events delivered before they are stored",
    file: "lib/run/recording.ts",
    find: "    store.durable().then(() => {",
    replace: "    Promise.resolve().then(() => {",
    test: "tests/server/serve_crash_test.ts",
    filter: "kill -9 of serve",
  },
  {
    name: "the queue closes before the last look at it",
    file: "lib/run/turn.ts",
    find: "  run.turn = undefined;\n  run.emitter.flush();",
    replace:
      "  run.turn = undefined;\n  run.closed = run.queue.length === 0;\n  run.emitter.flush();",
    test: "tests/run/steering_test.ts",
    filter: "before the queue closes",
  },
  {
    name: "a cancel in the quiet window is lost",
    file: "lib/run/turn.ts",
    find:
      "    if (run.abort.signal.aborted) throw run.abort.signal.reason;\n    stopReason",
    replace: "    stopReason",
    test: "tests/run/run_cancel_test.ts",
    filter: "quiet window",
  },
  {
    name: "permission requests during cancel answered by policy",
    file: "lib/run/permission_policy.ts",
    find: "cancelled: run.abort.signal.aborted,",
    replace: "cancelled: false,",
    test: "tests/run/run_cancel_test.ts",
    filter: "permission request sent while",
  },
  {
    name: "a rejection followed by end_turn reported as empty",
    file: "lib/run/turn.ts",
    find:
      'if (rejectedPermission && (unanswered || stopReason === "cancelled")) {',
    replace: 'if (rejectedPermission && stopReason === "cancelled") {',
    test: "tests/run/run_agent_quirks_test.ts",
    filter: "(end_turn, no text) after a rejected permission",
  },
  {
    name: "stop reason refusal not mapped",
    file: "lib/run/turn.ts",
    find: 'if (stopReason === "refusal") {',
    replace: 'if (stopReason === "refused") {',
    test: "tests/run/run_agent_failures_test.ts",
    filter: "refusal",
  },
  {
    name: "prompt errors reported as session errors",
    file: "lib/acp/client.ts",
    find: 'const code: ErrorCode = what === "session/prompt"',
    replace: 'const code: ErrorCode = what === "prompt"',
    test: "tests/run/run_agent_failures_test.ts",
    filter: "session/prompt with an error",
  },
  {
    name: "an unrecordable agent group reported with another code",
    file: "lib/agent/process.ts",
    find: '    throw new RunnerError(\n      "runner.internal",',
    replace: '    throw new RunnerError(\n      "acp.spawn_error",',
    test: "tests/run/run_agent_failures_test.ts",
    filter: "cannot record",
  },
  {
    name: "401 without WWW-Authenticate",
    file: "lib/server/app.ts",
    find:
      '      headers["www-authenticate"] = String(failure.detail?.scheme ?? "Bearer");',
    replace: "",
    test: "tests/server/serve_auth_test.ts",
    filter: "WWW-Authenticate",
  },
  {
    name: "gateway keys accepted per request",
    file: "lib/server/policy.ts",
    find: "    const allowed = CALLER_CONFIG_KEYS.includes(key) ||",
    replace:
      '    const allowed = key.startsWith("langbot-assets-gateway") || CALLER_CONFIG_KEYS.includes(key) ||',
    test: "tests/server/serve_auth_test.ts",
    filter: "callers cannot set",
  },
  {
    name: "the webhook waits past --n8n-wait-seconds",
    file: "lib/server/n8n/route.ts",
    find: "  if (timedOut) {",
    replace: "  if (timedOut && false) {",
    test: "tests/server/n8n_test.ts",
    filter: "conversation_busy",
  },
  {
    name: "DELETE of an active conversation allowed",
    file: "lib/server/meta.ts",
    find:
      '    if (active) {\n      throw new RunnerError(\n        "http.conflict",',
    replace:
      '    if (active && false) {\n      throw new RunnerError(\n        "http.conflict",',
    test: "tests/server/serve_requests_test.ts",
    filter: "DELETE",
  },
  {
    name: "no steering limit",
    file: "lib/run/steering.ts",
    find: 'if (run.queue.length >= STEERING_QUEUE_LIMIT) return "full";',
    replace: "",
    test: "tests/server/serve_requests_test.ts",
    filter: "queued follow-ups",
  },
  {
    name: "POST /v1/daemons/{id}/unfence does nothing",
    file: "lib/server/meta.ts",
    find: "      was_fenced: await ctx.daemons.unfence(daemonId),",
    replace: "      was_fenced: false,",
    test: "tests/server/serve_daemons_admin_test.ts",
    filter: "unfence --url",
  },
  {
    name: "probe --handshake-only opens a session",
    file: "lib/probe.ts",
    find:
      "    if (options.handshakeOnly && !options.recovery) return finish(report);",
    replace: "",
    test: "tests/probe_test.ts",
    filter: "handshake-only",
  },
  {
    name: "reconnect back-off without its 60 s cap",
    file: "lib/daemon/client.ts",
    find: "    Math.max(base, MAX_RECONNECT_DELAY_MS),",
    replace: "    Infinity,",
    test: "tests/daemon/client_test.ts",
    filter: "back-off",
  },
  {
    name: "an unanswered MCP request waits forever",
    file: "lib/daemon/mcp_requests.ts",
    find: "        const timer = setTimeout(() => {",
    replace: "        const timer = setTimeout(() => { return;",
    test: "tests/daemon/client_test.ts",
    filter: "relay.mcp_failed",
  },
  {
    name: "a real daemon run drops its unprocessed follow-ups",
    file: "lib/run/relayed_run.ts",
    find: "  if (life.queue.length) {",
    replace: "  if (life.queue.length && false) {",
    test: "tests/daemon/daemon_steering_test.ts",
    filter: "real job runner",
  },
  {
    name: "a streamed turn's completion without its text",
    file: "lib/run/turn.ts",
    find:
      '      message: { role: "assistant", content: current.text.toString() },',
    replace: '      message: { role: "assistant" },',
    test: "tests/server/serve_completions_test.ts",
    filter: "by default both completions carry the whole answer",
  },
  {
    name: "a daemon's events reach the hub's callers as the wire carried them",
    file: "lib/locations/daemon_turn.ts",
    find: "      const event = complete(fromRelayEvent(wireEvent, runner));",
    replace: "      const event = fromRelayEvent(wireEvent, runner);",
    test: "tests/server/serve_daemon_test.ts",
    filter: "runs through a real runner daemon",
  },
  {
    name: "a run listing without an index in its order",
    file: "lib/store/sqlite/schema.ts",
    find: "CREATE INDEX runs_by_created ON runs (created_at);",
    replace: "",
    test: "tests/store/store_plan_test.ts",
    filter: "every listing filter",
  },
  {
    name: "retention deletes active runs",
    file: "lib/store/sqlite/retention.ts",
    find: "     AND status <> 'active' ORDER BY created_at, rowid LIMIT ?`,",
    replace: "     ORDER BY created_at, rowid LIMIT ?`,",
    test: "tests/store/store_test.ts",
    filter: "never an active run",
  },
  {
    name: "an ended run whose outcome is not stored reads as active",
    file: "lib/store/unstored_outcomes.ts",
    find: "    this.#outcomes.set(runId, { ...outcome, at: Date.now() });",
    replace: "    void outcome;",
    test: "tests/store/store_failures_test.ts",
    filter: "final flush",
  },
  {
    name: "the store file's pages not checked at start",
    file: "lib/store/sqlite/store.ts",
    find: "const damage = options.checkIntegrity ? quickCheck(db) : undefined;",
    replace: "const damage = undefined as string | undefined;",
    test: "tests/store/store_file_test.ts",
    filter: "damaged",
  },
  {
    name: "the fleet takes any non-empty cluster token",
    file: "lib/server/fleet_router.ts",
    find: "return given !== undefined && sameSecret(given, clusterToken);",
    replace: "return Boolean(given);",
    test: "tests/contracts/guards_test.ts",
    filter: "the cluster token",
  },
  {
    name: "the Origin check ignores the port",
    file: "lib/server/request_guard.ts",
    find:
      "if (host && new URL(normalized).host === host.trim().toLowerCase()) {",
    replace: "if (host && new URL(normalized).hostname === hostName(host)) {",
    test: "tests/contracts/guards_test.ts",
    filter: "the same host on another port",
  },
  {
    name: "a *.name allowed host matches look-alikes",
    file: "lib/server/request_guard.ts",
    find: 'if (wanted.startsWith("*.")) return name.endsWith(wanted.slice(1));',
    replace:
      'if (wanted.startsWith("*.")) return name.endsWith(wanted.slice(2));',
    test: "tests/contracts/guards_test.ts",
    filter: "a *.name pattern",
  },
  {
    name: "an ssh-target starting with - is accepted",
    file: "lib/config.ts",
    find: '  if (result.sshTarget?.startsWith("-")) {',
    replace: '  if (result.sshTarget?.startsWith("--")) {',
    test: "tests/contracts/guards_test.ts",
    filter: "ssh-target",
  },
  {
    name: "the warm-agent key drops the agent's environment",
    file: "lib/run/targets.ts",
    find: "    env: command.env,\n    sessionCwd: parts.sessionCwd,\n",
    replace: "    sessionCwd: parts.sessionCwd,\n",
    test: "tests/contracts/identity_test.ts",
    filter: "every part of a local target",
  },
  {
    // The lease's epoch also tells instances apart: the break drops both.
    name: "the lost-replica sweep ignores the instance id",
    file: "lib/store/postgres/orphans.ts",
    find:
      "WHERE p.replica_id = r.owner_replica AND p.instance_id = r.owner_instance\n        AND p.epoch = r.owner_epoch AND",
    replace: "WHERE p.replica_id = r.owner_replica AND",
    test: "tests/store/store_postgres_test.ts",
    filter: "restarted under the same id",
  },
  {
    name: "the coalescer flushes without the redactor's held-back tail",
    file: "lib/run/coalesce.ts",
    find: 'flush(isTerminalEvent({ type }) ? "end" : "boundary");',
    replace: 'flush("boundary");',
    test: "tests/run/stream_properties_test.ts",
    filter: "coalescer:",
  },
  {
    name: "the redactor's cut splits a surrogate pair",
    file: "lib/secrets.ts",
    find: "  return pairSafe(buffer, cut);\n}",
    replace: "  return cut;\n}",
    test: "tests/run/stream_properties_test.ts",
    filter: "redactor:",
  },
  {
    name: "the stored-to-live hand-over dedupes with < instead of <=",
    file: "lib/server/stream.ts",
    find: "if ((event.sequence ?? 0) <= state.last) continue;",
    replace: "if ((event.sequence ?? 0) < state.last) continue;",
    test: "tests/run/stream_properties_test.ts",
    filter: "hand-over:",
  },
  {
    name: "the daemon's warm-agent key drops the agent's environment",
    file: "lib/run/targets.ts",
    find: "    env: command.env,\n    sessionCwd: parts.sessionCwd,\n",
    replace: "    sessionCwd: parts.sessionCwd,\n",
    test: "tests/daemon/daemon_warm_test.ts",
    filter: "the daemon's warm key",
  },
  {
    name: "a conversation's lapsed lease is never taken while its holder lives",
    file: "lib/store/postgres/fleet.ts",
    find: "OR conversation_leases.expires_at < now() OR ${force}",
    replace: "OR ${force}",
    test: "tests/store/store_postgres_test.ts",
    filter: "a conversation's lease is its id's alone",
  },
  {
    name: "at the connection cap no idle connection makes room",
    file: "lib/net/tcp_listener.ts",
    find:
      "if (full && !await this.evictOldestIdle()) return this.#refuse(conn);",
    replace: "if (full) return this.#refuse(conn);",
    test: "tests/net/tcp_listener_test.ts",
    filter: "busy ones are kept",
  },
  {
    name: "a failed accept ends the accept loop",
    file: "lib/net/tcp_listener.ts",
    find:
      "      if (state.closed || error instanceof Deno.errors.BadResource) return;",
    replace: "      return;",
    test: "tests/net/tcp_listener_test.ts",
    filter: "descriptors run out",
  },
  {
    name: "a PATH entry of $HOME mounted into the sandbox",
    file: "lib/agent/sandbox.ts",
    find: "  return root === clean ||",
    replace: "  return false && root === clean ||",
    test: "tests/agent/sandbox_test.ts",
    filter: "cannot read $HOME",
  },
  {
    name: "a confined agent without a PID namespace",
    file: "lib/agent/sandbox.ts",
    find: '"--unshare-pid",\n    "--unshare-ipc",',
    replace: '"--unshare-ipc",',
    test: "tests/agent/sandbox_test.ts",
    filter: "cannot read $HOME",
  },
  {
    name: "an unavailable sandbox left to the spawn",
    file: "lib/agent/process.ts",
    find: "if (options.sandbox) requireSandbox();",
    replace: "",
    test: "tests/agent/sandbox_cli_test.ts",
    filter: "without bubblewrap",
  },
  {
    name: "a caller lowers the operator's sandbox",
    file: "lib/run/caller_floor.ts",
    find: "  checkSandbox(operator, resolved);\n",
    replace: "",
    test: "tests/agent/sandbox_daemon_test.ts",
    filter: "never less",
  },
  {
    name: "the daemon's own sandbox=confined lowered by the hub",
    file: "lib/relay/payload.ts",
    find: 'sandbox: confined ? "confined" : asked.sandbox,',
    replace: "sandbox: asked.sandbox,",
    test: "tests/agent/sandbox_daemon_test.ts",
    filter: "asks sandbox=off",
  },
  {
    name: "the console parses the agent's HTML",
    file: "lib/server/console/markdown.js",
    find: "renderer: { html: (token) => escapeHtml(token.text) }",
    replace: "renderer: {}",
    test: "tests/server/console_hostile_test.ts",
    filter: "never execute",
  },
  {
    name: "the console's permission card offers only its first option",
    file: "lib/server/console/permission_cards.js",
    find: "for (const option of data.options || []) {",
    replace: "for (const option of (data.options || []).slice(0, 1)) {",
    test: "tests/server/console_controls_test.ts",
    filter: "approve always",
  },
  {
    name: "the console puts terminal output in as HTML",
    file: "lib/server/console/terminals.js",
    find:
      "if (last instanceof Text && last.length < 16384) last.appendData(text);\n  else pre.append(document.createTextNode(text));",
    replace: 'pre.insertAdjacentHTML("beforeend", text);',
    test: "tests/server/console_terminal_test.ts",
    filter: "terminal output streams",
  },
  {
    name: "a long terminal line widens the page",
    file: "lib/server/console_page.ts",
    find:
      "pre.terminal-output{font-family:ui-monospace,monospace;max-height:24rem;overflow:auto;overflow-wrap:anywhere}",
    replace:
      "pre.terminal-output{font-family:ui-monospace,monospace;max-height:24rem;overflow:visible;white-space:pre}",
    test: "tests/server/console_terminal_live_test.ts",
    filter: "wraps on a phone",
  },
  {
    name: "a long permission option name widens the page",
    file: "lib/server/console_page.ts",
    find:
      ".permission button{white-space:normal;max-width:100%;overflow-wrap:anywhere;text-align:left}\n",
    replace: "",
    test: "tests/server/console_layout_test.ts",
    filter: "wrap inside the card on a phone",
  },
  {
    name: "the console puts plan entries in as HTML",
    file: "lib/server/console/transcript.js",
    find: `    list.append(
      el(
        "li",
        { class: "plan-" + entry.status },
        entry.status + ": " + entry.content,
      ),
    );`,
    replace:
      '    list.append(Object.assign(el("li", { class: "plan-" + entry.status }), { innerHTML: entry.status + ": " + entry.content }));',
    test: "tests/server/console_hostile_fields_test.ts",
    filter: "show as text",
  },
  {
    name: "the console does not read a cut stream again",
    file: "lib/server/console/run_events.js",
    find: "if (await readEvents(response, stream, seen)) return;",
    replace: "await readEvents(response, stream, seen); return;",
    test: "tests/server/console_stream_test.ts",
    filter: "cut mid-run",
  },
  {
    name: "the console takes a late run record for the run open now",
    file: "lib/server/console/run_view.js",
    find: `    const run = await record.json();
    if (state.stream !== stream) return;`,
    replace: "    const run = await record.json();",
    test: "tests/server/console_resilience_test.ts",
    filter: "while the first still loads",
  },
  {
    name: "a double click on the console's Start run starts two runs",
    file: "lib/server/console/new_run.js",
    find: `  if (submit.disabled) return;
  $("new-error").textContent = "";
  submit.disabled = true;
  // One run id per form: an attempt whose answer was lost and is sent again cannot start a second run.
  state.newRunId = state.newRunId || newRunId();`,
    replace: `  $("new-error").textContent = "";
  state.newRunId = newRunId();`,
    test: "tests/server/console_resilience_test.ts",
    filter: "double click",
  },
  {
    name: "a follow-up turn without its turn.started",
    file: "lib/run/turn.ts",
    find: "  if (followUp) {\n    run.emitter.emit(TURN_STARTED",
    replace: "  if (false && followUp) {\n    run.emitter.emit(TURN_STARTED",
    test: "tests/run/steering_test.ts",
    filter: "stored turn.started",
  },
  {
    name: "a caller's approving fallback loosens the operator's policy",
    file: "lib/run/permission_floor.ts",
    find:
      "rank(resolved.permissionFallback) < rank(operator.permissionFallback)",
    replace: "false",
    test: "tests/run/permission_floor_test.ts",
    filter: "cannot turn the operator's ask",
  },
  {
    name: "a session config value the agent does not offer is sent anyway",
    file: "lib/run/session_config.ts",
    find: "if (!values.includes(String(value))) {",
    replace: "if (false) {",
    test: "tests/run/session_config_test.ts",
    filter: "a mode the agent does not offer",
  },
  {
    name: "a conversation's remembered session config values not given back",
    file: "lib/run/session_memory.ts",
    find: "if (!remembered || !config.reuseSession) {",
    replace: "if (true) {",
    test: "tests/run/session_config_test.ts",
    filter: "runner run --conversation remembers",
  },
  {
    name: "the warm-agent key ignores remembered session config values",
    file: "lib/run/targets.ts",
    find: "effectiveSessionConfig(config, parts.sessionMemory).values;",
    replace: "effectiveSessionConfig(config, undefined).values;",
    test: "tests/contracts/identity_test.ts",
    filter: "a remembered session config value counts",
  },
  {
    name: "permission rules ignored for fs/write_text_file",
    file: "lib/acp/confined_files.ts",
    find: "if (options.mayWrite && !options.mayWrite(target)) {",
    replace: "if (false) {",
    test: "tests/run/permission_rules_test.ts",
    filter: "the first matching rule decides",
  },
  {
    name: "a client terminal's cwd not confined to the workspace",
    file: "lib/acp/fs.ts",
    find:
      "if (real !== undefined && !isInside(realRoot, real)) throw outside(path);",
    replace: "",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "cwd must be a directory inside the workspace",
  },
  {
    name: "fs/read_text_file opens by a name checked before the open",
    file: "lib/acp/confined_files.ts",
    find: "    if (!KERNEL_CHECKED) return await Deno.readTextFile(real);",
    replace: "    return await Deno.readTextFile(real);",
    test: "tests/security/fs_link_race_test.ts",
    filter: "runner run, unconfined: under a link race",
  },
  {
    name: "the fs helper does not check where cd took it",
    file: "lib/acp/confined_files.ts",
    find: '  `[ "\\${here%?.}" = "$1" ] || exit ${MOVED};`,',
    replace: "  `true || exit ${MOVED};`,",
    test: "tests/security/fs_link_race_test.ts",
    filter: "runner run, sandbox=confined: under a link race",
  },
  {
    name: "a client terminal's command does not check where cd took it",
    file: "lib/run/terminal_cwd.ts",
    find: `'[ "\${here%?.}" = "$1" ] || {',`,
    replace: "'true || {',",
    test: "tests/security/fs_link_race_test.ts",
    filter: "runner run, unconfined: under a link race",
  },
  {
    name: "a client terminal's command not put to the permission policy",
    file: "lib/run/terminals.ts",
    find: "if (!await mayRunCommand(run, command)) {",
    replace: "if (false) {",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "rules reject the command",
  },
  {
    name: "a confined agent's terminal runs unconfined",
    file: "lib/run/terminals.ts",
    find: "sandboxArgv(requireSandbox(), launch.sandbox, entered, root)",
    replace: "entered",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "runs under the agent's sandbox",
  },
  {
    name: "a failed or cancelled run leaves its terminals running",
    file: "lib/run/teardown.ts",
    find: "  await run.terminals?.closeAll();\n",
    replace: "",
    test: "tests/server/serve_terminals_test.ts",
    filter: "a cancelled run's commands are gone",
  },
  {
    name: "a warm agent keeps its run's terminals",
    file: "lib/run/reuse.ts",
    find: "  await run.terminals?.closeAll();\n",
    replace: "",
    test: "tests/server/serve_terminals_test.ts",
    filter: "never its run's commands",
  },
  {
    name: "a terminal's env entries reach bwrap's own environment",
    file: "lib/run/terminals.ts",
    find: "    if (!launch.sandbox) {\n      for (const entry of checked.env)",
    replace: "    if (launch) {\n      for (const entry of checked.env)",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "never in bwrap's own environment",
  },
  {
    name: "a terminal may set LD_PRELOAD",
    file: "lib/run/terminal_command.ts",
    find: 'return name.startsWith("LD_")',
    replace: 'return name.startsWith("NOT_LD_")',
    test: "tests/cli/cli_terminals_test.ts",
    filter: "LD_PRELOAD of a library in the workspace is refused",
  },
  {
    name: "a terminal's env left out of its permission decision",
    file: "lib/run/terminal_command.ts",
    find: "    ...env.map((entry) => `${entry.name}=${entry.value}`),\n",
    replace: "",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "cannot change which program a rule allowed",
  },
  {
    name: "a terminal's program looked up on the request's PATH",
    file: "lib/run/terminals.ts",
    find: "const commandArgv = [checked.program, ...checked.args];",
    replace: "const commandArgv = [checked.command, ...checked.args];",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "cannot change which program a rule allowed",
  },
  {
    name: "terminal output events without a byte cap",
    file: "lib/run/terminals.ts",
    find: "    const room = Math.min(cap - sent, runRoom);",
    replace: "    const room = runRoom;",
    test: "tests/cli/cli_terminals_test.ts",
    filter: "endless output puts at most terminal-output-bytes into events",
  },
  {
    name: "terminal output events without a run-wide cap",
    file: "lib/run/terminals.ts",
    find: "    cap: run.config.terminalOutputBytes * RUN_OUTPUT_FACTOR,",
    replace: "    cap: Infinity,",
    test: "tests/security/terminal_flood_test.ts",
    filter: "run_limit",
  },
  {
    name: "a confined agent keeps its capabilities",
    file: "lib/agent/sandbox_hardening.ts",
    find: '    "--cap-drop",\n    "ALL",\n',
    replace: "",
    test: "tests/security/sandbox_escape_test.ts",
    filter: "root runner",
  },
  {
    name: "a confined agent without the seccomp filter",
    file: "lib/agent/process.ts",
    find: "  if (options.sandbox) {\n    const confined",
    replace: "  if (options.sandbox && false) {\n    const confined",
    test: "tests/security/sandbox_escape_test.ts",
    filter: "root runner",
  },
  {
    name: "an unconfined agent without a PID namespace",
    file: "lib/agent/pid_namespace.ts",
    find: "  if (!bwrap) return [...argv];",
    replace: "  if (bwrap || !bwrap) return [...argv];",
    test: "tests/security/outlive_test.ts",
    filter: "sandbox=off",
  },
  {
    name: "a caller turns on client terminals the operator left off",
    file: "lib/run/caller_floor.ts",
    find: '      "client-terminals",\n      "clientTerminals",\n',
    replace: '      "client-terminals",\n      "fsRead",\n',
    test: "tests/server/serve_terminals_test.ts",
    filter: "cannot turn on terminals the operator left off",
  },
  {
    name: "a caller raises terminal-timeout past the operator's",
    file: "lib/run/caller_floor.ts",
    find: '  "terminalTimeout",\n];',
    replace: "];",
    test: "tests/server/serve_terminals_test.ts",
    filter: "cannot turn on terminals the operator left off",
  },
  {
    name: "a hub turns on a daemon's client terminals",
    file: "lib/relay/payload.ts",
    find: "clientTerminals: asked.clientTerminals && own.clientTerminals,",
    replace: "clientTerminals: asked.clientTerminals,",
    test: "tests/daemon/daemon_terminals_test.ts",
    filter: "its own client-terminals=false and terminal-timeout hold",
  },
  {
    name: "runner serve lets a request without a token through",
    file: "lib/server/api_auth.ts",
    find:
      "    if (!match || !safeEqual(match[1], token)) throw unauthorized();",
    replace:
      "    if (match && !safeEqual(match[1], token)) throw unauthorized();",
    test: "tests/security/api_from_inside_test.ts",
    filter: "answers 401 http.unauthorized to every run route",
  },
  {
    name: "the n8n webhook with --n8n-auth none is open",
    file: "lib/server/api_auth.ts",
    find: '    if (c.req.path === N8N_WEBHOOK && config.n8n.auth !== "none") {',
    replace: "    if (c.req.path === N8N_WEBHOOK) {",
    test: "tests/security/api_from_inside_test.ts",
    filter: "an unconfined agent that calls the runner's own API gets 401",
  },
  {
    name: "a run uses the caller's workspace as written after the check",
    file: "lib/run/caller_floor.ts",
    find: "  return { ...resolved, ...workspace, ...sessionCwd };",
    replace: "  return { ...resolved, ...(workspace && sessionCwd && {}) };",
    test: "tests/security/workspace_race_test.ts",
    filter: "workspace link swapped",
  },
  {
    name: "a daemon's agent gets fs/* the daemon left off",
    file: "lib/daemon/job_floor.ts",
    find: "      fsRead: config.fsRead && operator.fsRead,",
    replace: "      fsRead: config.fsRead,",
    test: "tests/security/daemon_floor_test.ts",
    filter: "a real runner daemon",
  },
  {
    name: "a session keeping a value the operator no longer allows is restored",
    file: "lib/run/caller_floor.ts",
    find: "  if (!kept.length) return undefined;",
    replace: "  return undefined;",
    test: "tests/security/restored_mode_test.ts",
    filter: "no longer lets callers choose",
  },
  {
    name: "remembered values the caller may no longer choose are asked again",
    file: "lib/run/setup.ts",
    find: "  const sessionMemory = remembered && choices\n",
    replace: "  const sessionMemory = remembered && choices && false\n",
    test: "tests/security/caller_floor_test.ts",
    filter: "remembered settings from an earlier allowed run",
  },
  {
    name: "a daemon asks again for remembered values the hub may not choose",
    file: "lib/run/setup.ts",
    find: "  const sessionMemory = remembered && choices\n",
    replace: "  const sessionMemory = remembered && choices && false\n",
    test: "tests/security/restored_mode_test.ts",
    filter: "a daemon does not restore",
  },
  {
    name: "the daemon hub takes a hello without checking its token",
    file: "lib/hub/relay_hub.ts",
    find: "      hasToken: shared !== undefined || this.#tokens.size > 0,",
    replace: "      hasToken: false,",
    test: "tests/security/hub_impersonation_test.ts",
    filter: "a local process that says hello on the default loopback hub",
  },
  {
    name: "runner serve keeps a daemon token but opens its loopback hub",
    file: "lib/cli/serve/daemon_token.ts",
    find: '    daemon: { ...daemon, token, tokenSource: "data-dir" },',
    replace: "    daemon: { ...daemon, loopbackWithoutToken: true },",
    test: "tests/security/hub_impersonation_test.ts",
    filter: "an unconfined agent of another run that dials the hub",
  },
  {
    name: "runner daemon sends the kept token off loopback",
    file: "daemon.ts",
    find: "token === undefined && isLoopbackHost(parsed.hostname)",
    replace: "token === undefined",
    test: "tests/security/hub_impersonation_test.ts",
    filter: "sends the kept token only to a hub on loopback",
  },
  {
    name: "a caller names a registry agent the operator did not choose",
    file: "lib/server/policy.ts",
    find: "  checkRegistryProvider(serve, normalized.provider);\n",
    replace: "",
    test: "tests/security/caller_floor_test.ts",
    filter: "registry agent the operator did not choose",
  },
  {
    name: "registry archive links made through earlier links",
    file: "lib/agent/registry/unpack.ts",
    find: "  checkLinkPlan(links);\n",
    replace: "",
    test: "tests/agent/registry_archive_test.ts",
    filter: "climb through an earlier link",
  },
  {
    name: "the fs helper splits the agent's file name into words",
    file: "lib/acp/confined_files.ts",
    find: `'shift; exec dd "$@" bs=65536 status=none',`,
    replace: "'shift; exec dd $@ bs=65536 status=none',",
    test: "tests/security/fs_names_test.ts",
    filter: "runner run, unconfined: hostile file names",
  },
  {
    name: "a link out of the workspace tells whether a file exists behind it",
    file: "lib/acp/confined_files.ts",
    find: "    if (real === undefined) throw await missing(root, full, path);",
    replace:
      "    if (real === undefined) throw acp.RequestError.resourceNotFound(path);",
    test: "tests/security/fs_names_test.ts",
    filter: "runner run, sandbox=confined: hostile file names",
  },
  {
    name: "an fs/* lookup failure answers with the runner's paths",
    file: "lib/acp/confined_files.ts",
    find: "    throw unusable(path, error);",
    replace: "    throw error;",
    test: "tests/security/fs_names_test.ts",
    filter: "runner run, unconfined: hostile file names",
  },
  {
    name: "a confined agent reaches the host's own addresses",
    file: "lib/agent/sandbox_network.ts",
    find: "  const blocked = hostAddresses(tools.ip);",
    replace: "  const blocked: string[] = [];",
    test: "tests/security/sandbox_network_test.ts",
    filter: "reaches no address of the host",
  },
  {
    name: "an import plants runs into an existing conversation",
    file: "lib/store/sqlite/store.ts",
    find:
      "  #conversationKnown(conversationId: string): boolean {\n    return this",
    replace:
      "  #conversationKnown(conversationId: string): boolean {\n    return false && this",
    test: "tests/security/import_plant_test.ts",
    filter: "an import that names an existing conversation",
  },
];

async function uncommitted(root: string, file: string): Promise<boolean> {
  const result = await new Deno.Command("git", {
    args: ["status", "--porcelain", "--", file],
    cwd: root,
    stdout: "piped",
  }).output();
  return new TextDecoder().decode(result.stdout).trim() !== "";
}

/** Makes one break, runs its test, restores the file; true when the test failed. */
async function check(root: string, entry: MustCatch): Promise<string> {
  const path = `${root}${entry.file}`;
  const original = Deno.readTextFileSync(path);
  if (original.split(entry.find).length !== 2) {
    return "PATTERN NOT FOUND (update scripts/must_catch.ts)";
  }
  const restore = () => Deno.writeTextFileSync(path, original);
  const restoreAndExit = () => {
    restore();
    Deno.exit(130);
  };
  for (const signal of STOP_SIGNALS) {
    Deno.addSignalListener(signal, restoreAndExit);
  }
  Deno.writeTextFileSync(path, original.replace(entry.find, entry.replace));
  try {
    const result = await new Deno.Command(Deno.execPath(), {
      args: ["test", "-A", "--filter", entry.filter, entry.test],
      cwd: root,
      stdout: "piped",
      stderr: "piped",
      // A break that makes its test hang is caught too (CI's time bound
      // fails it), but must not hold this script forever.
      signal: AbortSignal.timeout(TEST_TIME_LIMIT_MS),
    }).output();
    const output = new TextDecoder().decode(result.stdout);
    if (result.signal) return "caught (its test hung and was stopped)";
    if (result.success) return "NOT CAUGHT";
    return /FAILED/.test(output)
      ? "caught"
      : `ERROR (exit ${result.code}, no test failed)`;
  } finally {
    restore();
    for (const signal of STOP_SIGNALS) {
      Deno.removeSignalListener(signal, restoreAndExit);
    }
  }
}

const STOP_SIGNALS: Deno.Signal[] = ["SIGINT", "SIGTERM"];

/** How long one break's test may run before it counts as hung. */
const TEST_TIME_LIMIT_MS = 120_000;

if (import.meta.main) {
  const root = new URL("..", import.meta.url).pathname;
  const chosen = Deno.args.length
    ? MUST_CATCH.filter((entry) => Deno.args.includes(entry.name))
    : MUST_CATCH;
  let missed = 0;
  for (const entry of chosen) {
    if (await uncommitted(root, entry.file)) {
      console.log(
        `skipped (uncommitted changes in ${entry.file}): ${entry.name}`,
      );
      missed++;
      continue;
    }
    const outcome = await check(root, entry);
    if (!outcome.startsWith("caught")) missed++;
    console.log(`${outcome}: ${entry.name} (${entry.test})`);
  }
  console.log(`${chosen.length - missed} of ${chosen.length} breaks caught`);
  Deno.exit(missed ? 1 : 0);
}
