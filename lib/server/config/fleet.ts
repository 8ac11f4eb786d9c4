/**
 * The fleet settings of `runner serve` (`--store postgres://…` and the flags
 * that go with it): the store URL, this replica's id and advertised URL, the
 * cluster token and the lease; see `docs/fleet.md`.
 *
 * @module
 */

import { invalidConfig } from "./sources.ts";

/** How this replica joins a fleet sharing one PostgreSQL store. */
export interface FleetSettings {
  /** The PostgreSQL URL (`--store`, `RUNNER_STORE_URL`). */
  storeUrl: string;
  /** This replica's id (`--replica-id`, default the host name plus a random suffix). */
  replicaId: string;
  /** Where other replicas reach this one (`--advertise-url`). */
  advertiseUrl: string;
  /** The secret replicas send each other (`--cluster-token`). */
  clusterToken: string;
  /** The replica lease, in milliseconds (`--lease-seconds`). */
  leaseMs: number;
}

/**
 * The fleet settings, when `--store` is given (`clusterToken`: from
 * `--cluster-token` or `--cluster-token-file`).
 */
export function fleetSettings(
  server: Record<string, unknown>,
  clusterToken: string | undefined,
): FleetSettings | undefined {
  const storeUrl = (server.store as string | undefined)?.trim();
  if (!storeUrl) return undefined;
  if (!/^postgres(ql)?:\/\//.test(storeUrl)) {
    throw invalidConfig(
      "--store must be a postgres:// URL (leave it out for the embedded SQLite store).",
    );
  }
  if (!clusterToken) {
    throw invalidConfig(
      '--store joins a fleet: give every replica the same --cluster-token (e.g. "$(runner token)").',
    );
  }
  const leaseSeconds = server["lease-seconds"] as number;
  if (!(leaseSeconds > 0) || leaseSeconds > 3600) {
    throw invalidConfig(
      "lease-seconds: must be greater than 0 and at most 3600.",
    );
  }
  return {
    storeUrl,
    // Unique by default: two replicas on one host must not share an id.
    replicaId: (server["replica-id"] as string | undefined) ||
      `${hostName()}-${crypto.randomUUID().slice(0, 8)}`,
    advertiseUrl: advertiseUrl(server),
    clusterToken,
    leaseMs: Math.round(leaseSeconds * 1000),
  };
}

/** This machine's name, without needing --allow-sys. */
function hostName(): string {
  const fromEnv = Deno.env.get("HOSTNAME")?.trim();
  if (fromEnv) return fromEnv;
  try {
    return Deno.readTextFileSync("/etc/hostname").trim() || "runner";
  } catch {
    return "runner";
  }
}

function advertiseUrl(server: Record<string, unknown>): string {
  const given = server["advertise-url"] as string | undefined;
  if (given) {
    if (!/^https?:\/\//.test(given)) {
      throw invalidConfig(
        "--advertise-url must be an http:// or https:// URL.",
      );
    }
    return given.replace(/\/+$/, "");
  }
  const host = String(server.host);
  const port = server.port as number;
  if (port === 0 || ["0.0.0.0", "::", "[::]"].includes(host)) {
    throw invalidConfig(
      "--store needs --advertise-url (the URL other replicas reach this one at) when --host is a wildcard or --port is 0.",
    );
  }
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** The password in a store URL, if any. */
export function storePassword(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return decodeURIComponent(new URL(url).password) || undefined;
  } catch {
    return undefined;
  }
}
