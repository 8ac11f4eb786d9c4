/**
 * Who may talk to `runner serve` from a browser: the `Host` rule that stops
 * DNS rebinding and the `Origin` rule that stops cross-site requests. With
 * no token on loopback (`--loopback-without-token`), any web page the
 * developer opens could otherwise start a coding agent on their machine; with
 * one, the rules keep a page from even trying. See `docs/http-api.md`
 * ("Host and Origin").
 *
 * @module
 */

import { isIP } from "node:net";
import { RunnerError } from "../errors.ts";

/** What the guard allows beyond its built-in rules. */
export interface RequestGuardSettings {
  /**
   * Whether `Host` is checked: without an API token given by the operator
   * (a rebinding page could use an open API; the token `runner serve` made
   * itself means a default loopback server), or when the operator listed
   * hosts. With a given token and no list, a page cannot authenticate
   * anyway, and service names such as `runner:8080` keep working.
   */
  checkHost: boolean;
  /** The listen address (a name given here is an accepted `Host`). */
  listenHost: string;
  /** Extra accepted `Host` names (`*` any, `*.example.com` its subdomains). */
  allowedHosts: string[];
  /** Extra accepted browser origins (`https://app.example.com`, `*` any). */
  allowedOrigins: string[];
}

/** The request headers the guard reads. */
export interface GuardedHeaders {
  /** `Host`. */
  host?: string;
  /** `Origin`. */
  origin?: string;
  /** `Sec-Fetch-Site`. */
  secFetchSite?: string;
}

/** The host name of a `Host` header value (no port, no brackets, lower case). */
export function hostName(host: string): string {
  const value = host.trim().toLowerCase();
  if (value.startsWith("[") && !value.includes("]")) return "";
  const bare = value.startsWith("[")
    ? value.slice(1, value.indexOf("]"))
    : value.replace(/:\d*$/, "");
  return bare.replace(/\.$/, "");
}

function nameMatches(name: string, pattern: string): boolean {
  const wanted = pattern.trim().toLowerCase().replace(/\.$/, "");
  if (wanted === "*") return true;
  if (wanted.startsWith("*.")) return name.endsWith(wanted.slice(1));
  return name === wanted;
}

/**
 * Whether a `Host` value is acceptable: an IP address (a page can only reach
 * an address by its own origin, so no rebinding), `localhost`, the listen
 * name, or an allowed name.
 */
export function hostAllowed(
  host: string,
  settings: RequestGuardSettings,
): boolean {
  const name = hostName(host);
  if (!name) return false;
  if (isIP(name) !== 0 || name === "localhost") return true;
  if (name === hostName(settings.listenHost)) return true;
  return settings.allowedHosts.some((pattern) => nameMatches(name, pattern));
}

function originOf(value: string): string | undefined {
  try {
    const url = new URL(value);
    return url.origin === "null" ? undefined : url.origin.toLowerCase();
  } catch {
    return undefined;
  }
}

/** Whether a browser `Origin` may call: same host as the request, or allowed. */
export function originAllowed(
  origin: string,
  host: string | undefined,
  settings: RequestGuardSettings,
): boolean {
  const normalized = originOf(origin);
  if (!normalized) return false;
  if (host && new URL(normalized).host === host.trim().toLowerCase()) {
    return true;
  }
  return settings.allowedOrigins.some((allowed) =>
    allowed.trim() === "*" || originOf(allowed) === normalized
  );
}

/** Whether `origin` is one the operator allowed (for CORS answers). */
export function originListed(
  origin: string,
  settings: RequestGuardSettings,
): boolean {
  const normalized = originOf(origin);
  return normalized !== undefined &&
    settings.allowedOrigins.some((allowed) =>
      allowed.trim() === "*" || originOf(allowed) === normalized
    );
}

/**
 * Refuses a request from a foreign `Host` (`http.host_not_allowed`) or a
 * cross-site browser page (`http.origin_not_allowed`).
 */
export function checkRequestSource(
  headers: GuardedHeaders,
  settings: RequestGuardSettings,
): void {
  const { host, origin } = headers;
  if (
    settings.checkHost && host !== undefined && !hostAllowed(host, settings)
  ) {
    throw new RunnerError(
      "http.host_not_allowed",
      `Requests for host "${
        hostName(host)
      }" are refused (a guard against DNS rebinding). Call the server by its IP address or localhost, or have the operator allow the name with --allowed-hosts.`,
    );
  }
  if (origin !== undefined) {
    if (originAllowed(origin, host, settings)) return;
    throw new RunnerError(
      "http.origin_not_allowed",
      `Requests from the web page origin "${origin}" are refused (a guard against cross-site requests). The operator can allow it with --allowed-origins.`,
    );
  }
  if (headers.secFetchSite?.toLowerCase() === "cross-site") {
    throw new RunnerError(
      "http.origin_not_allowed",
      "Cross-site browser requests are refused (a guard against cross-site requests). The operator can allow an origin with --allowed-origins.",
    );
  }
}
