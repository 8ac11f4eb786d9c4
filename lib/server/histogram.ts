/**
 * Prometheus histograms and counters with labels, in the text exposition
 * format (0.0.4).
 *
 * @module
 */

/** Label names to values. */
export type Labels = Record<string, string>;

/** Escapes a label value. */
export function labelValue(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll(
    "\n",
    "\\n",
  );
}

/** `{a="x",b="y"}`, or "" without labels. */
export function labelText(labels: Labels): string {
  const pairs = Object.entries(labels).map(([name, value]) =>
    `${name}="${labelValue(value)}"`
  );
  return pairs.length ? `{${pairs.join(",")}}` : "";
}

interface Series {
  labels: Labels;
  counts: number[];
  sum: number;
  count: number;
}

/** A histogram whose series are told apart by their labels. */
export class Histogram {
  #series = new Map<string, Series>();

  /** Makes a histogram with these upper bounds (seconds). */
  constructor(readonly buckets: readonly number[]) {}

  /** Records one observation. */
  observe(seconds: number, labels: Labels = {}): void {
    const key = labelText(labels);
    let series = this.#series.get(key);
    if (!series) {
      series = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    series.sum += seconds;
    series.count++;
    this.buckets.forEach((bound, index) => {
      if (seconds <= bound) series.counts[index]++;
    });
  }

  /** The exposition lines, HELP and TYPE first. */
  render(name: string, help: string): string[] {
    const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
    for (const { labels, counts, sum, count } of this.#series.values()) {
      const bucket = (le: string, value: number) =>
        `${name}_bucket${labelText({ ...labels, le })} ${value}`;
      lines.push(
        ...this.buckets.map((bound, index) =>
          bucket(String(bound), counts[index])
        ),
        bucket("+Inf", count),
        `${name}_sum${labelText(labels)} ${sum}`,
        `${name}_count${labelText(labels)} ${count}`,
      );
    }
    return lines;
  }
}

/** A counter whose series are told apart by their labels. */
export class Counter {
  #series = new Map<string, number>();

  /** Adds `amount` to the series of `labels`. */
  add(labels: Labels, amount = 1): void {
    const key = labelText(labels);
    this.#series.set(key, (this.#series.get(key) ?? 0) + amount);
  }

  /** The exposition lines, HELP and TYPE first. */
  render(name: string, help: string): string[] {
    return [
      `# HELP ${name} ${help}`,
      `# TYPE ${name} counter`,
      ...[...this.#series].map(([labels, value]) =>
        `${name}${labels} ${value}`
      ),
    ];
  }
}
