/**
 * A real nginx on a loopback port in front of `runner serve` replicas, for
 * the load-balancer tests: its own generated config, pid file, logs and temp
 * paths in a temporary directory, run in the foreground (`daemon off`) as a
 * child process and stopped by the test.
 *
 * @module
 */

import { join } from "node:path";
import { CLUSTER_TOKEN_HEADER } from "../lib/server/fleet_router.ts";
import { tempDir } from "./helpers.ts";
import { freePort } from "./helpers.ts";

/** Where Debian's nginx lives, if installed. */
export const NGINX_PATH = ["/usr/sbin/nginx", "/usr/local/sbin/nginx"].find(
  (path) => {
    try {
      return Deno.statSync(path).isFile;
    } catch {
      return false;
    }
  },
);

/** A running nginx. */
export interface TestNginx {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The generated nginx.conf. */
  config: string;
  /** Stops nginx (fast shutdown: open streams are cut). */
  close(): Promise<void>;
}

/**
 * The operator's config of `docs/fleet.md` ("Load balancers"), with every
 * path inside `dir`: round robin over `upstreams` (`host:port`), streams
 * unbuffered, WebSocket upgrades (`/acp`) passed on, the client's `Host`
 * passed on, a client-sent cluster token stripped.
 */
export function nginxConfig(
  options: { dir: string; port: number; upstreams: string[] },
): string {
  const { dir, port, upstreams } = options;
  // As root, nginx's workers would run as nobody, who cannot write here.
  const user = Deno.uid() === 0 ? ["user root;"] : [];
  return [
    ...user,
    "daemon off;",
    "master_process on;",
    "worker_processes 1;",
    `pid ${join(dir, "nginx.pid")};`,
    `error_log ${join(dir, "error.log")} info;`,
    "events { worker_connections 256; }",
    "http {",
    `  access_log ${join(dir, "access.log")};`,
    `  client_body_temp_path ${join(dir, "client_body")};`,
    `  proxy_temp_path ${join(dir, "proxy")};`,
    `  fastcgi_temp_path ${join(dir, "fastcgi")};`,
    `  uwsgi_temp_path ${join(dir, "uwsgi")};`,
    `  scgi_temp_path ${join(dir, "scgi")};`,
    "  map $http_upgrade $connection_upgrade {",
    "    default upgrade;",
    "    '' \"\";",
    "  }",
    "  upstream runners {",
    ...upstreams.map((address) =>
      `    server ${address} max_fails=1 fail_timeout=2s;`
    ),
    "    keepalive 16;",
    "  }",
    "  server {",
    `    listen 127.0.0.1:${port};`,
    "    client_max_body_size 64m;",
    "    location / {",
    "      proxy_pass http://runners;",
    "      proxy_http_version 1.1;",
    "      proxy_set_header Upgrade $http_upgrade;",
    "      proxy_set_header Connection $connection_upgrade;",
    "      proxy_set_header Host $http_host;",
    `      proxy_set_header ${CLUSTER_TOKEN_HEADER} "";`,
    "      proxy_buffering off;",
    "      proxy_request_buffering off;",
    "      proxy_read_timeout 1h;",
    "      proxy_send_timeout 1h;",
    "      proxy_next_upstream error timeout;",
    "    }",
    "  }",
    "}",
    "",
  ].join("\n");
}

/** Starts nginx on 127.0.0.1 in front of `upstreams` (`host:port` each). */
export async function startNginx(upstreams: string[]): Promise<TestNginx> {
  if (!NGINX_PATH) {
    throw new Error("nginx is not installed (apt-get install nginx)");
  }
  const dir = tempDir("runner-nginx-");
  const port = freePort();
  const config = join(dir, "nginx.conf");
  Deno.writeTextFileSync(config, nginxConfig({ dir, port, upstreams }));
  const child = new Deno.Command(NGINX_PATH, {
    // -e: the log nginx writes before it has read its config.
    args: ["-p", dir, "-e", join(dir, "error.log"), "-c", config],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  let exited = false;
  const status = child.status.then((value) => {
    exited = true;
    return value;
  });
  // nginx says nothing when it is ready: it is once it accepts a connection.
  for (;;) {
    try {
      (await Deno.connect({ hostname: "127.0.0.1", port })).close();
      break;
    } catch {
      if (exited) {
        const log = await Deno.readTextFile(join(dir, "error.log"))
          .catch(() => "");
        throw new Error(`nginx did not start: ${await stderr}\n${log}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  return {
    url: `http://127.0.0.1:${port}`,
    config,
    async close() {
      try {
        child.kill("SIGTERM");
      } catch { /* gone */ }
      await status;
      await stderr.catch(() => {});
    },
  };
}
