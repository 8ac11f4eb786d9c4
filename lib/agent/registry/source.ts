/**
 * Where the registry comes from: `registry-url` (https, file, or http on
 * loopback), kept in the data dir's cache and fetched again after the refresh
 * interval. Offline, the cache serves and says how old it is.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath as fromFileUrl } from "node:url";
import { RunnerError } from "../../errors.ts";
import { type Catalogue, readCatalogue } from "./catalogue.ts";

/** The largest registry document read (16 MiB). */
const MAX_REGISTRY_BYTES = 16 * 1024 * 1024;
/** How long one fetch of the registry may take. */
const FETCH_TIMEOUT_MS = 30_000;

/** Options for {@linkcode loadCatalogue}. */
export interface LoadCatalogueOptions {
  /** The registry's URL (`registry-url`). */
  url: string;
  /** The runner's data dir: the cache lives in `<dataDir>/registry/`. */
  dataDir: string;
  /** Seconds a cached copy is used before fetching again (`registry-refresh`). */
  refreshSeconds: number;
  /** Fetch now whatever the cache's age. */
  refresh?: boolean;
  /** The clock (tests). */
  now?: () => number;
}

/** The registry as loaded, and how fresh it is. */
export interface LoadedCatalogue {
  /** The usable agents and the skipped entries. */
  catalogue: Catalogue;
  /** The URL it came from, as shown ({@linkcode shownUrl}). */
  url: string;
  /** When it was fetched (ms since the epoch). */
  fetchedAt: number;
  /** `network`: fetched now; `cache`: the cached copy, still within its refresh interval; `stale-cache`: the cached copy because the fetch failed. */
  from: "network" | "cache" | "stale-cache";
  /** With `stale-cache`: why the fetch failed. */
  fetchError?: string;
}

interface CacheFile {
  url: string;
  fetchedAt: number;
  document: unknown;
}

/**
 * `url` as messages, logs and listings show it: without a user, a password
 * or a query, which may hold a mirror's credentials.
 */
export function shownUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.protocol === "file:") return parsed.href;
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}${
      parsed.search ? "?…" : ""
    }`;
  } catch {
    return "(not a URL)";
  }
}

/** `text` with `url` (which an error of `fetch` may quote) shown as {@linkcode shownUrl}. */
export function withShownUrl(text: string, url: string): string {
  return text.replaceAll(url, shownUrl(url));
}

/** The cache file of `url` in `dataDir`. */
export function catalogueCachePath(dataDir: string, url: string): string {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(url)) {
    hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  }
  return join(
    dataDir,
    "registry",
    `${hash.toString(16).padStart(8, "0")}.json`,
  );
}

/**
 * The registry of `url`: the cached copy while it is younger than the
 * refresh interval, else fetched (and cached); a failed fetch falls back to
 * the cache, marked `stale-cache` with its reason.
 *
 * @throws {RunnerError} `registry.unreachable` when the fetch fails and
 * nothing is cached.
 */
export async function loadCatalogue(
  options: LoadCatalogueOptions,
): Promise<LoadedCatalogue> {
  const now = options.now ?? Date.now;
  const path = catalogueCachePath(options.dataDir, options.url);
  const cached = await readCache(path, options.url);
  const age = cached ? now() - cached.fetchedAt : Infinity;
  if (
    cached && !options.refresh && age >= 0 &&
    age < options.refreshSeconds * 1000
  ) {
    return { ...cached, url: shownUrl(options.url), from: "cache" };
  }
  let document: unknown;
  let catalogue: Catalogue;
  try {
    document = JSON.parse(await fetchText(options.url));
    catalogue = readCatalogue(document);
  } catch (error) {
    const reason = withShownUrl(
      error instanceof Error ? error.message : String(error),
      options.url,
    );
    if (cached) {
      return {
        ...cached,
        url: shownUrl(options.url),
        from: "stale-cache",
        fetchError: reason,
      };
    }
    throw new RunnerError(
      "registry.unreachable",
      `The ACP agent registry at ${
        shownUrl(options.url)
      } could not be read (${reason}) and no copy is cached. Check the network or registry-url (a file:// mirror works offline), then try again.`,
      { detail: { url: shownUrl(options.url) } },
    );
  }
  const fetchedAt = now();
  await writeCache(path, { url: options.url, fetchedAt, document });
  return { catalogue, url: shownUrl(options.url), fetchedAt, from: "network" };
}

/** A line saying how old a loaded registry is, when it is not fresh from the network. */
export function catalogueAgeNote(
  loaded: LoadedCatalogue,
  now = Date.now(),
): string | undefined {
  if (loaded.from === "network") return undefined;
  const age = describeAge(now - loaded.fetchedAt);
  return loaded.from === "cache"
    ? `registry: the cached copy of ${loaded.url}, fetched ${age} ago`
    : `registry: ${loaded.url} could not be read (${loaded.fetchError}); using the cached copy fetched ${age} ago`;
}

function describeAge(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 120) return `${seconds} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} days`;
}

/** The cached registry of `url`, whatever its age, without fetching; undefined when none is cached. */
export async function cachedCatalogue(
  dataDir: string,
  url: string,
): Promise<LoadedCatalogue | undefined> {
  const cached = await readCache(catalogueCachePath(dataDir, url), url);
  return cached ? { ...cached, url, from: "cache" } : undefined;
}

async function readCache(
  path: string,
  url: string,
): Promise<Omit<LoadedCatalogue, "from" | "url"> | undefined> {
  let file: CacheFile;
  try {
    file = JSON.parse(await Deno.readTextFile(path));
  } catch {
    return undefined;
  }
  if (file?.url !== url || typeof file.fetchedAt !== "number") return undefined;
  try {
    return {
      catalogue: readCatalogue(file.document),
      fetchedAt: file.fetchedAt,
    };
  } catch {
    return undefined;
  }
}

async function writeCache(path: string, file: CacheFile): Promise<void> {
  await Deno.mkdir(dirname(path), { recursive: true });
  const temp = `${path}.${crypto.randomUUID()}.tmp`;
  try {
    await Deno.writeTextFile(temp, JSON.stringify(file));
    await Deno.rename(temp, path);
  } catch {
    // A cache that cannot be written costs a fetch next time, nothing more.
    await Deno.remove(temp).catch(() => {});
  }
}

async function fetchText(url: string): Promise<string> {
  if (url.startsWith("file:")) {
    const path = fromFileUrl(url);
    const { size } = await Deno.stat(path);
    if (size > MAX_REGISTRY_BYTES) throw new Error("larger than 16 MiB");
    return await Deno.readTextFile(path);
  }
  const response = await fetch(url, {
    signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
    redirect: "follow",
  });
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`HTTP ${response.status}`);
  }
  const bytes = await readLimited(response, MAX_REGISTRY_BYTES);
  return new TextDecoder().decode(bytes);
}

/** A response's body, refused past `limit` bytes. */
export async function readLimited(
  response: Response,
  limit: number,
  onBytes?: (received: number) => void,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let received = 0;
  if (!response.body) return new Uint8Array();
  for await (const chunk of response.body) {
    received += chunk.byteLength;
    if (received > limit) {
      throw new RangeError(`larger than ${limit} bytes`);
    }
    chunks.push(chunk);
    onBytes?.(received);
  }
  const all = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    all.set(chunk, at);
    at += chunk.byteLength;
  }
  return all;
}
