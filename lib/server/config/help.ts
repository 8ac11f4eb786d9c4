/**
 * The help text of `runner serve` (every option; `docs/http-api.md` has the
 * same list with environment names and defaults).
 *
 * @module
 */

/** Help text of `runner serve`. */
export const SERVE_HELP = `Usage: runner serve [options]

Runs the HTTP service: the runs API (/v1/runs), the n8n webhook
(/v1/webhooks/n8n), /healthz, /metrics and /openapi.json. See docs/http-api.md.

Every route that starts, steers, answers or reads a run needs the API token
(Authorization: Bearer TOKEN), on loopback too. Without --api-token, runner serve
makes one on first start, keeps it in DATA_DIR/api-token (mode 0600) and prints
the console URL with it; runner token --show prints it again.

Options (each also RUNNER_<NAME> in the environment, or a key of --config):
  --host ADDR                 listen address (default 127.0.0.1)
  --port N                    listen port (default 8080; 0 = any free port)
  --data-dir DIR              store and agent records (default: the user data dir)
  --api-token TOKEN           bearer token for /v1 and the console (default: the
                              one kept in DATA_DIR/api-token, made on first start)
  --api-token-file FILE       read the API token from a file (wins over --api-token)
  --loopback-without-token    RISKY: with no --api-token on loopback, serve the API
                              without any token, so every process on this machine
                              (another user's, an agent's, a web-fetch tool a
                              prompt injection steers) may start runs, approve
                              permission requests and read every conversation
  --config FILE               JSON file of these options and run-config keys
  --allow-custom-commands     let callers set acp-command, provider=custom,
                              mcp-servers-json and ssh command options
  --allow-env-names A,B       env-json names callers may set (default none)
  --max-concurrent-runs N     active runs at most (default 16)
  --max-body-mb N             request body limit (default 50)
  --acp-max-buffered-mb N     /acp output held for a client that does not read
                              it, per connection (default 64)
  --allowed-hosts A,B         Host names accepted besides IP addresses, localhost
                              and --host (* any, *.example.com subdomains)
  --allowed-origins A,B       browser origins allowed to call (e.g.
                              https://app.example.com; * any)
  --max-connections N         open connections at most (default 1000)
  --header-timeout S          seconds to send a request's headers (default 10)
  --request-timeout S         seconds to send a whole request (default 300)
  --keep-alive-timeout S      idle seconds between requests (default 5)
  --keepalive-seconds N       keep-alive on silent SSE/NDJSON/n8n streams (default 15)
  --log-level LEVEL           debug | info | warn | error (default info)
  --log-format FORMAT         json | text (default: text on a terminal, else json)
  --agent-idle-timeout S      seconds an agent stays warm between runs (default 300; 0 off)
  --max-warm-agents N         warm agents at most, LRU stopped first (default 16)
  --retain-runs-days N        delete finished runs (and their events) started
                              more than N days ago (default 30; 0 = keep)
  --retain-runs N             delete finished runs past the newest N
                              (default 100000; 0 = no limit)
  --n8n-auth MODE             none | basic | header | jwt (default none: the
                              webhook needs the API token like /v1)
  --n8n-auth-user USER        basic auth user
  --n8n-auth-password PASS    basic auth password
  --n8n-auth-header-name H    header auth name
  --n8n-auth-header-value V   header auth value
  --n8n-jwt-secret SECRET     shared secret for jwt auth (HS256/HS384/HS512)
  --n8n-output-key KEY        answer key for stream=false (default response)
  --n8n-wait-seconds N        wait for a busy conversation (default 60)
  --n8n-merge-ms MS           send deltas within MS of the last item as one
                              item (default 250; 0 = one item per delta)
  --daemon-enabled            listen for runner daemons (coding-relay-v1)
  --daemon-host ADDR          daemon hub address (default 127.0.0.1)
  --daemon-port N             daemon hub port (default 8766)
  --daemon-token TOKEN        shared secret daemons must send, on loopback too
                              (default: the one kept in DATA_DIR/daemon-token,
                              made on first start; runner daemon on this machine
                              reads it; runner token --show --daemon prints it)
  --daemon-token-file FILE    read the daemon token from a file (wins over
                              --daemon-token)
  --daemon-tokens-file FILE   per-daemon tokens, JSON {"<daemon-id>": "<token>"}
  --daemon-loopback-without-token
                              RISKY: with no daemon token on loopback, accept
                              daemons without any token, so every process on
                              this machine (another user's, an agent's) may
                              connect as a daemon ID that is not connected and
                              receive its runs' prompts, config and sessions
  --daemon-max-jobs-per-id N  jobs one daemon ID may run at once (default 16)
  --daemon-max-connected N    daemons the hub keeps, connected plus fenced
                              (default 128, the relay's own limit; at most 10000)
  --env-json-file FILE        server-wide env-json default from a JSON file
                              (wins over --env-json; keeps values out of ps)
  --store postgres://…        share runs, sessions, events, leases and daemon
                              fences with other replicas in PostgreSQL
                              (RUNNER_STORE_URL; default: SQLite in --data-dir)
  --replica-id ID             this replica's id in the fleet (default: host-random)
  --advertise-url URL         where other replicas reach this one
                              (default http://HOST:PORT)
  --cluster-token TOKEN       secret replicas send each other (required with --store)
  --cluster-token-file FILE   read the cluster token from a file (wins over
                              --cluster-token)
  --lease-seconds N           replica and conversation lease (default 15)
  --<config-key> VALUE        server-wide run default, e.g. --provider codex,
                              --workspace /srv/work, --env-json '{"K":"v"}'
`;
