/**
 * Re-checks every preset pin of `lib/agent/preset_pins.ts` against the npm
 * registry and writes what the registry answered to
 * `tests/fixtures/preset_pins_registry.json`: for each pin its package's
 * `engines`, `bin` and `optionalDependencies`, and for a native program the
 * platform package npm would install on each of {@linkcode PIN_PLATFORMS}
 * (its version, `os` and `cpu`, or that it is missing). `--install` also
 * installs each native pin into a temporary directory on this machine's
 * platform (no agent is started). `tests/agent/preset_pins_test.ts` compares the
 * table with the record, so re-run this after changing a pin:
 *
 *     deno run -A scripts/check_pins.ts [--install]
 *
 * It prints what in the table disagrees with the registry.
 *
 * @module
 */

import { join } from "node:path";
import {
  currentPlatform,
  PIN_PLATFORMS,
  type PinPlatform,
  PRESET_PINS,
  type PresetPin,
} from "../lib/agent/preset_pins.ts";

/** Where the record lives. */
export const RECORD_PATH = new URL(
  "../tests/fixtures/preset_pins_registry.json",
  import.meta.url,
);

/** What the registry had for one platform package. */
export type PlatformRecord =
  | { package: string; version: string; os: string[]; cpu: string[] }
  | { package: string | null; missing: string };

/** What the registry had for one pin. */
export interface PinRecord {
  /** The package. */
  package: string;
  /** The pinned version (null: the package itself was looked up). */
  version: string | null;
  /** Whether the registry had it (that version, or the package at all). */
  found: boolean;
  /** `engines.node`, or null. */
  enginesNode?: string | null;
  /** `bin`. */
  bin?: Record<string, string>;
  /** `optionalDependencies` (name → version). */
  optionalDependencies?: Record<string, string>;
  /** The native program's platform packages, per platform. */
  native?: {
    from: string;
    version: string;
    /** The pin's dependency range for `from`, when it is not the pin's own package. */
    dependencySpec?: string | null;
    platforms: Record<PinPlatform, PlatformRecord>;
  };
  /** `npm install` results on the platforms it was run on: ok, or the error. */
  installed?: Partial<Record<PinPlatform, { ok: boolean; detail: string }>>;
}

/** The whole record file. */
export interface PinsRecord {
  /** When the registry was asked (YYYY-MM-DD). */
  checked: string;
  /** The registry asked. */
  registry: string;
  /** By preset name. */
  pins: Record<string, PinRecord>;
}

/** A manifest as `npm view <spec> --json` prints it, or why not. */
type Manifest = Record<string, unknown> | { missing: string };

async function npm(args: string[], cwd?: string) {
  const output = await new Deno.Command("npm", {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
    env: { npm_config_update_notifier: "false", npm_config_fund: "false" },
  }).output();
  return {
    ok: output.success,
    stdout: new TextDecoder().decode(output.stdout),
    stderr: new TextDecoder().decode(output.stderr),
  };
}

async function view(spec: string): Promise<Manifest> {
  const result = await npm(["view", spec, "--json"]);
  const answer = result.stdout.trim() ? JSON.parse(result.stdout) : {};
  if (!result.ok || answer.error) {
    return { missing: answer.error?.summary ?? result.stderr.trim() };
  }
  // A range matching several versions prints an array: the last is newest.
  return Array.isArray(answer) ? answer.at(-1) : answer;
}

function isMissing(manifest: Manifest): manifest is { missing: string } {
  return typeof manifest.missing === "string";
}

function stringMap(value: unknown): Record<string, string> {
  return value && typeof value === "object"
    ? Object.fromEntries(
      Object.entries(value).sort(([a], [b]) => a.localeCompare(b)),
    )
    : {};
}

/** The platform package `optionalDependencies` name for one platform (`…-linux-x64`). */
function platformPackage(
  optional: Record<string, string>,
  platform: PinPlatform,
): [string, string] | undefined {
  return Object.entries(optional).find(([name]) =>
    name.endsWith(`-${platform}`)
  );
}

async function checkPlatform(
  optional: Record<string, string>,
  platform: PinPlatform,
  version: string,
): Promise<PlatformRecord> {
  const named = platformPackage(optional, platform);
  if (!named) {
    return { package: null, missing: "not in optionalDependencies" };
  }
  const [name, range] = named;
  const manifest = await view(`${name}@${range}`);
  if (isMissing(manifest)) return { package: name, missing: manifest.missing };
  if (manifest.version !== version) {
    return { package: name, missing: `version ${manifest.version}` };
  }
  return {
    package: name,
    version: String(manifest.version),
    os: (manifest.os as string[] | undefined) ?? [],
    cpu: (manifest.cpu as string[] | undefined) ?? [],
  };
}

/** Asks the registry about one pin. */
export async function checkPin(pin: PresetPin): Promise<PinRecord> {
  const spec = pin.version ? `${pin.package}@${pin.version}` : pin.package;
  const manifest = await view(spec);
  if (isMissing(manifest)) {
    return { package: pin.package, version: pin.version, found: false };
  }
  const record: PinRecord = {
    package: pin.package,
    version: pin.version,
    found: true,
    enginesNode: (manifest.engines as { node?: string } | undefined)?.node ??
      null,
    bin: stringMap(manifest.bin),
    optionalDependencies: stringMap(manifest.optionalDependencies),
  };
  if (pin.native) {
    const { from, version } = pin.native;
    let optional = record.optionalDependencies!;
    let dependencySpec: string | null | undefined;
    if (from !== pin.package) {
      dependencySpec = stringMap(manifest.dependencies)[from] ?? null;
      const carrier = await view(`${from}@${version}`);
      optional = isMissing(carrier)
        ? {}
        : stringMap(carrier.optionalDependencies);
    }
    const platforms = {} as Record<PinPlatform, PlatformRecord>;
    for (const platform of PIN_PLATFORMS) {
      platforms[platform] = await checkPlatform(optional, platform, version);
    }
    record.native = { from, version, dependencySpec, platforms };
  }
  return record;
}

/** Installs a pin into a fresh directory; ok when its program and platform package are there. */
export async function installPin(
  pin: PresetPin,
  record: PinRecord,
): Promise<{ ok: boolean; detail: string }> {
  const prefix = await Deno.makeTempDir({ prefix: "pin-install-" });
  try {
    const result = await npm([
      "install",
      "--no-save",
      "--no-audit",
      "--prefix",
      prefix,
      `${pin.package}@${pin.version}`,
    ]);
    if (!result.ok) {
      return { ok: false, detail: result.stderr.trim().split("\n")[0] };
    }
    const platform = currentPlatform() as PinPlatform;
    const platformRecord = record.native?.platforms[platform];
    const name = platformRecord?.package;
    const found = [join(prefix, "node_modules", ".bin", pin.bin)];
    if (name) found.push(join(prefix, "node_modules", name, "package.json"));
    for (const path of found) {
      try {
        await Deno.stat(path);
      } catch {
        return { ok: false, detail: `installed, but ${path} is missing` };
      }
    }
    return {
      ok: true,
      detail: `${pin.bin} and ${name ?? "its files"} installed`,
    };
  } finally {
    await Deno.remove(prefix, { recursive: true });
  }
}

/** Where a pinned preset's platforms disagree with the record of its package. */
function platformMismatches(pin: PresetPin, seen: PinRecord): string[] {
  const problems: string[] = [];
  const problem = (text: string) => problems.push(text);
  for (const platform of PIN_PLATFORMS) {
    const listed = pin.platforms.includes(platform);
    const reason = pin.notOn?.[platform];
    if (listed === Boolean(reason)) {
      problem(
        `${platform} must be either in platforms or have a reason in notOn`,
      );
      continue;
    }
    if (!pin.native) {
      if (!listed) problem(`${platform}: JavaScript pins run everywhere`);
      continue;
    }
    const found = seen.native?.platforms[platform];
    const installs = found !== undefined && "version" in found &&
      found.os.includes(platform.split("-")[0]) &&
      found.cpu.includes(platform.split("-")[1]);
    if (listed && !installs) {
      problem(
        `${platform}: listed, but the record has ${
          JSON.stringify(found ?? null)
        }`,
      );
    }
    if (!listed && installs) {
      problem(`${platform}: the registry has ${found.package} now`);
    }
    const installed = seen.installed?.[platform];
    if (listed && installed && !installed.ok) {
      problem(`${platform}: npm install failed: ${installed.detail}`);
    }
  }
  return problems;
}

/**
 * Where the pins table disagrees with the record: each line names a preset
 * and what to fix (re-run this script, or change the table).
 */
export function recordMismatches(
  pins: Readonly<Record<string, PresetPin>>,
  record: PinsRecord,
): string[] {
  const problems: string[] = [];
  for (const [name, pin] of Object.entries(pins)) {
    const seen = record.pins[name];
    const problem = (text: string) => problems.push(`${name}: ${text}`);
    if (!seen || seen.package !== pin.package || seen.version !== pin.version) {
      problem(
        `the record has ${
          seen ? `${seen.package}@${seen.version}` : "nothing"
        }, the table ${pin.package}@${pin.version}: re-run scripts/check_pins.ts`,
      );
      continue;
    }
    if (pin.version === null) {
      if (seen.found) {
        problem(
          "the registry has the package now: pin a version (and check it)",
        );
      }
      if (pin.platforms.length) problem("unpinned, yet lists platforms");
      continue;
    }
    if (!seen.found) {
      problem(`the registry has no ${pin.package}@${pin.version}`);
      continue;
    }
    if ((seen.enginesNode ?? null) !== pin.node) {
      problem(
        `engines.node is ${
          seen.enginesNode ?? "unset"
        }, the table says ${pin.node}`,
      );
    }
    if (!Object.values(seen.bin ?? {}).length) {
      problem("the package has no bin for npx to run");
    }
    problems.push(
      ...platformMismatches(pin, seen).map((text) => `${name}: ${text}`),
    );
    if (pin.native && !seen.native) {
      problem("native, but the record has no platform packages");
    }
    if (
      pin.native && pin.native.from !== pin.package &&
      seen.native?.dependencySpec !== pin.native.version
    ) {
      problem(
        `${pin.native.from} is a dependency at ${
          seen.native?.dependencySpec ?? "no version"
        }, not exactly ${pin.native.version}`,
      );
    }
  }
  for (const name of Object.keys(record.pins)) {
    if (!pins[name]) problems.push(`${name}: in the record, not in the table`);
  }
  return problems;
}

async function readRecord(): Promise<PinsRecord | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(RECORD_PATH));
  } catch {
    return undefined;
  }
}

async function main(args: string[]) {
  const install = args.includes("--install");
  const previous = await readRecord();
  const registry = (await npm(["config", "get", "registry"])).stdout.trim();
  const record: PinsRecord = {
    checked: new Date().toISOString().slice(0, 10),
    registry,
    pins: {},
  };
  for (const [name, pin] of Object.entries(PRESET_PINS)) {
    console.error(`checking ${name} (${pin.package}@${pin.version ?? "*"})`);
    const seen = await checkPin(pin);
    const before = previous?.pins[name];
    if (
      before?.installed && before.package === seen.package &&
      before.version === seen.version
    ) seen.installed = before.installed;
    const platform = currentPlatform() as PinPlatform;
    if (
      install && pin.native && seen.found &&
      PIN_PLATFORMS.includes(platform)
    ) {
      console.error(`  installing on ${platform}`);
      seen.installed = {
        ...seen.installed,
        [platform]: await installPin(pin, seen),
      };
    }
    record.pins[name] = seen;
  }
  await Deno.writeTextFile(RECORD_PATH, JSON.stringify(record, null, 2) + "\n");
  const problems = recordMismatches(PRESET_PINS, record);
  console.log(
    problems.length
      ? `The table in lib/agent/preset_pins.ts disagrees with the registry:\n${
        problems.join("\n")
      }`
      : "The table in lib/agent/preset_pins.ts agrees with the registry.",
  );
  return problems.length ? 1 : 0;
}

if (import.meta.main) Deno.exit(await main(Deno.args));
