/**
 * Reading a Prometheus text exposition the way a scraper would, for the
 * `/metrics` tests.
 *
 * @module
 */

import assert from "node:assert/strict";

/** What a Prometheus text exposition declares and samples. */
export interface Exposition {
  /** Each metric family's `# TYPE`, by name. */
  types: Map<string, string>;
  /** Each sample's value, by name and label set as written. */
  samples: Map<string, number>;
}

/**
 * Every sample of a Prometheus text exposition, checked for syntax, a numeric
 * value and a TYPE line (histogram series by their family's).
 */
export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples = new Map<string, number>();
  for (const line of text.split("\n").filter(Boolean)) {
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$/.exec(line);
    if (type) {
      assert.ok(!types.has(type[1]), `two TYPE lines for ${type[1]}`);
      types.set(type[1], type[2]);
      continue;
    }
    if (line.startsWith("# HELP ")) continue;
    const sample =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_]\w*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$/
        .exec(line);
    assert.ok(sample, `not a sample line: ${line}`);
    const family = sample[1].replace(/_(bucket|sum|count)$/, "");
    assert.ok(
      types.has(sample[1]) || types.get(family) === "histogram",
      `no TYPE for ${sample[1]}`,
    );
    assert.ok(!Number.isNaN(Number(sample[3])), `bad value in ${line}`);
    samples.set(sample[1] + (sample[2] ?? ""), Number(sample[3]));
  }
  return { types, samples };
}
