import assert from "node:assert/strict";
import {
  PIN_PLATFORMS,
  pinStartHint,
  PRESET_PINS,
  type PresetPin,
} from "../../lib/agent/preset_pins.ts";
import {
  type PinsRecord,
  RECORD_PATH,
  recordMismatches,
} from "../../scripts/check_pins.ts";

const RECORD: PinsRecord = JSON.parse(Deno.readTextFileSync(RECORD_PATH));

function withPin(name: string, change: Partial<PresetPin>) {
  return { ...PRESET_PINS, [name]: { ...PRESET_PINS[name], ...change } };
}

Deno.test("every pin installs on each of the four platforms or says why not", () => {
  assert.deepEqual(PIN_PLATFORMS, [
    "linux-x64",
    "linux-arm64",
    "darwin-x64",
    "darwin-arm64",
  ]);
  for (const [name, pin] of Object.entries(PRESET_PINS)) {
    if (pin.version === null) {
      assert.equal(pin.evidence, "not-found", name);
      continue;
    }
    for (const platform of PIN_PLATFORMS) {
      const reason = pin.notOn?.[platform] ?? "";
      assert.notEqual(
        pin.platforms.includes(platform),
        reason.length > 0,
        `${name} on ${platform}: listed, or a reason why not`,
      );
    }
  }
});

Deno.test("the pins agree with the registry's answers recorded by scripts/check_pins.ts", () => {
  assert.deepEqual(recordMismatches(PRESET_PINS, RECORD), []);
  assert.match(RECORD.checked, /^\d{4}-\d{2}-\d{2}$/);
  // On linux-x64 the native pins were installed, not only looked up.
  for (const [name, pin] of Object.entries(PRESET_PINS)) {
    if (!pin.native || !pin.platforms.includes("linux-x64")) continue;
    assert.equal(RECORD.pins[name].installed?.["linux-x64"]?.ok, true, name);
  }
});

Deno.test("a pin changed without re-checking the registry fails the comparison", () => {
  assert.deepEqual(
    recordMismatches(withPin("kilo", { version: "7.8.1" }), RECORD),
    [
      "kilo: the record has @kilocode/cli@7.7.7, the table @kilocode/cli@7.8.1: re-run scripts/check_pins.ts",
    ],
  );
  assert.deepEqual(
    recordMismatches(
      withPin("opencode", {
        platforms: [...PIN_PLATFORMS],
        notOn: undefined,
      }),
      RECORD,
    ),
    ["darwin-x64", "darwin-arm64"].map((platform) =>
      `opencode: ${platform}: listed, but the record has ${
        JSON.stringify(
          RECORD.pins.opencode.native?.platforms[platform as "darwin-x64"],
        )
      }`
    ),
  );
  assert.deepEqual(
    recordMismatches(withPin("qwen-code", { node: ">=20" }), RECORD),
    ["qwen-code: engines.node is >=22.0.0, the table says >=20"],
  );
  assert.deepEqual(
    recordMismatches(withPin("codex", { platforms: ["linux-x64"] }), RECORD),
    ["linux-arm64", "darwin-x64", "darwin-arm64"].map((platform) =>
      `codex: ${platform} must be either in platforms or have a reason in notOn`
    ),
  );
  const { autohand: _, ...withoutAutohand } = PRESET_PINS;
  assert.deepEqual(recordMismatches(withoutAutohand, RECORD), [
    "autohand: in the record, not in the table",
  ]);
});

Deno.test("a preset's start hint names what it needs and a platform its pin does not install on", () => {
  assert.equal(
    pinStartHint(PRESET_PINS["pi-acp"], { name: "pi-acp", source: "fallback" }),
    "pi-acp needs Node >=20; `pi` 0.81.0 or later on PATH, which pi-acp starts (npm i -g @earendil-works/pi-coding-agent; Node >=22.19.0).",
  );
  assert.equal(
    pinStartHint(PRESET_PINS.kilo, {
      name: "kilo",
      source: "fallback",
      platform: "darwin-arm64",
    }),
    "@kilocode/cli@7.7.7 does not install on darwin-arm64 (the registry has no darwin-arm64 package of @kilocode/cli@7.7.7); install the agent so `kilo` is on the agent's PATH, or set acp-command.",
  );
  // The agent's own executable does not come from the pin's packages.
  assert.equal(
    pinStartHint(PRESET_PINS.kilo, {
      name: "kilo",
      source: "executable",
      platform: "darwin-arm64",
    }),
    undefined,
  );
  assert.equal(
    pinStartHint(PRESET_PINS.codex, {
      name: "codex",
      source: "fallback",
      platform: "linux-arm64",
    }),
    undefined,
  );
  assert.match(
    pinStartHint(PRESET_PINS.dirac, { name: "dirac", source: "fallback" }) ??
      "",
    /dirac's fallback is unpinned: the npm registry had no dirac-cli when it was checked \(2026-11-30\); install the agent so `dirac-cli` is on the agent's PATH/,
  );
});

Deno.test("docs/config.md's pin table shows each pin's version and platforms", () => {
  const docs = Deno.readTextFileSync(
    new URL("../../docs/config.md", import.meta.url),
  );
  for (const [name, pin] of Object.entries(PRESET_PINS)) {
    const row = docs.split("\n").find((line) =>
      line.startsWith(`| \`${name}\` `)
    ) ?? "";
    const cells = row.split("|").map((cell) => cell.trim());
    assert.equal(cells[4], pin.version ? `\`${pin.version}\`` : "unpinned");
    assert.equal(
      cells[7],
      pin.version === null
        ? "—"
        : !pin.native
        ? "any (JavaScript)"
        : pin.platforms.length === PIN_PLATFORMS.length
        ? "all four"
        : pin.platforms.join(", "),
      name,
    );
  }
});
