/**
 * An ACP agent registry served on 127.0.0.1 for the tests: `registry.json`
 * and the archives it points at, with a count of the requests each got.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { fixtureAgentArchive } from "./registry_archives.ts";

/** A registry the test controls. */
export interface TestRegistry {
  /** The `registry-url`. */
  registryUrl: string;
  /** The server's base (`http://127.0.0.1:PORT`). */
  base: string;
  /**
   * Serves `bytes` at `/files/<name>`; returns its URL and sha256. With
   * `hold`, each download sends its first `after` bytes, then waits for
   * `until` before the rest.
   */
  addFile(
    name: string,
    bytes: Uint8Array,
    hold?: { after: number; until: Promise<void> },
  ): { url: string; sha256: string };
  /** Sets the `agents` of `registry.json`. */
  setAgents(agents: unknown[]): void;
  /** Requests per path so far. */
  hits: Map<string, number>;
  /** Stops the server. */
  close(): Promise<void>;
}

/** Starts a registry on 127.0.0.1. */
export function serveRegistry(): TestRegistry {
  const files = new Map<string, Uint8Array>();
  const holds = new Map<string, { after: number; until: Promise<void> }>();
  const hits = new Map<string, number>();
  let agents: unknown[] = [];
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen() {} },
    (request) => {
      const { pathname } = new URL(request.url);
      hits.set(pathname, (hits.get(pathname) ?? 0) + 1);
      if (pathname === "/registry.json") {
        return Response.json({ version: "1.0.0", agents });
      }
      const file = files.get(pathname);
      if (!file) return new Response("not found", { status: 404 });
      const hold = holds.get(pathname);
      if (hold) return heldResponse(file, hold);
      return new Response(file as Uint8Array<ArrayBuffer>, {
        headers: { "content-type": "application/octet-stream" },
      });
    },
  );
  const base = `http://127.0.0.1:${server.addr.port}`;
  return {
    registryUrl: `${base}/registry.json`,
    base,
    hits,
    addFile(name, bytes, hold) {
      files.set(`/files/${name}`, bytes);
      if (hold) holds.set(`/files/${name}`, hold);
      return {
        url: `${base}/files/${name}`,
        sha256: createHash("sha256").update(bytes).digest("hex"),
      };
    },
    setAgents(next) {
      agents = next;
    },
    close: () => server.shutdown(),
  };
}

/** `bytes` with their length announced, the rest sent once `hold.until` resolves. */
function heldResponse(
  bytes: Uint8Array,
  hold: { after: number; until: Promise<void> },
): Response {
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      controller.enqueue(bytes.slice(0, hold.after));
      await hold.until;
      controller.enqueue(bytes.slice(hold.after));
      controller.close();
    },
  });
  return new Response(body, {
    headers: {
      "content-type": "application/octet-stream",
      "content-length": String(bytes.length),
    },
  });
}

/** This machine's registry platform key. */
export function platformKey(): string {
  return `${Deno.build.os}-${Deno.build.arch}`;
}

/** A registry entry whose binary for this platform is `archive`. */
export function binaryEntry(
  id: string,
  target: { archive: string; cmd: string; sha256?: string; args?: string[] },
  version = "1.0.0",
): Record<string, unknown> {
  return {
    id,
    name: id,
    version,
    description: `test agent ${id}`,
    authors: ["tests"],
    license: "MIT",
    distribution: { binary: { [platformKey()]: target } },
  };
}

/** What {@linkcode listFixtureAgent} puts in a registry. */
export interface FixtureAgentListing {
  /** The agent's registry id. */
  id: string;
  /** The archive's file name under `/files/`. */
  file: string;
  /** The archive (see `fixtureAgentArchive`). */
  archive: Uint8Array;
  /** The command in the archive (default `bin/run-agent`). */
  cmd?: string;
  /** The fixture agent's arguments. */
  args?: string[];
  /** The version listed (default 1.0.0). */
  version?: string;
  /** Holds each download part-way (see {@linkcode TestRegistry.addFile}). */
  hold?: { after: number; until: Promise<void> };
}

/**
 * Serves `archive` and lists it as the registry's only agent, its binary
 * `cmd` run with `args`; returns the archive's URL and sha256.
 */
export function listFixtureAgent(
  registry: TestRegistry,
  listing: FixtureAgentListing,
): { url: string; sha256: string } {
  const served = registry.addFile(listing.file, listing.archive, listing.hold);
  registry.setAgents([binaryEntry(listing.id, {
    archive: served.url,
    cmd: listing.cmd ?? "bin/run-agent",
    args: listing.args,
  }, listing.version)]);
  return served;
}

/** What {@linkcode listHeldFixtureAgent} lists: a listing but for its archive. */
export interface HeldAgentListing
  extends Omit<FixtureAgentListing, "archive" | "hold"> {
  /** Bytes of padding in the archive (it must be larger than the hold). */
  padding: number;
}

/**
 * Lists a fixture agent (see {@linkcode listFixtureAgent}) whose padded
 * archive's download stops after its first MiB until `release` is called.
 */
export async function listHeldFixtureAgent(
  registry: TestRegistry,
  listing: HeldAgentListing,
): Promise<{ archive: Uint8Array; release: () => void }> {
  const archive = await fixtureAgentArchive({ padding: listing.padding });
  const released = Promise.withResolvers<void>();
  listFixtureAgent(registry, {
    ...listing,
    archive,
    hold: { after: 1024 * 1024 + 4096, until: released.promise },
  });
  return { archive, release: () => released.resolve() };
}
