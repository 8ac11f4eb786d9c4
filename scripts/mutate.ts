/**
 * Mutation testing of the guard modules with StrykerJS: `deno task mutate
 * [module …]` runs Stryker once per module (default: every module of
 * `mutation_modules.ts`), its command test runner running `deno test -A`
 * over the module's tests for each mutant, and prints killed / all per
 * module. Reports (HTML and JSON) go to `reports/mutation/<module>/`, which
 * git ignores. A module given as `lib/x.ts:40-90` gets only the mutants on
 * those lines. Options: `--tests a.ts,b.ts` (instead of the module's own
 * list), `--concurrency N` (Stryker's test runners, default 1),
 * `--timeout-ms N` (a mutant's run longer than N ms plus three times the
 * first run's counts as a hang; default 120000), `--list`.
 * See `docs/testing.md`, "Mutation testing".
 *
 * @module
 */

import { parseArgs } from "node:util";
import { join, relative, resolve } from "node:path";
import { GUARD_MODULES, testsFor } from "./mutation_modules.ts";

/** The pinned StrykerJS (dev-only: never in the import map or the binary). */
const STRYKER = "npm:@stryker-mutator/core@10.1.1/stryker";

const ROOT = resolve(new URL("..", import.meta.url).pathname);

/** Mutant counts of one module's report. */
interface Score {
  module: string;
  killed: number;
  survived: number;
  timeout: number;
  noCoverage: number;
  errors: number;
}

/** The Stryker config of one module's run. */
function strykerConfig(
  module: string,
  tests: string[],
  options: {
    reportDir: string;
    sandboxDir: string;
    concurrency: number;
    timeoutMs: number;
  },
): Record<string, unknown> {
  return {
    testRunner: "command",
    // No type check: a mutant is judged by what runs, and Stryker's own
    // way to keep instrumented files from failing one (`disableTypeChecks`)
    // rewrites test files too.
    commandRunner: { command: `deno test -A --no-check ${tests.join(" ")}` },
    disableTypeChecks: false,
    mutate: [module],
    coverageAnalysis: "off",
    concurrency: options.concurrency,
    // A loaded machine: a slow test is not a hang.
    timeoutMS: options.timeoutMs,
    timeoutFactor: 3,
    reporters: ["clear-text", "html", "json", "progress-append-only"],
    clearTextReporter: { allowColor: false, logTests: false },
    htmlReporter: { fileName: join(options.reportDir, "index.html") },
    jsonReporter: { fileName: join(options.reportDir, "report.json") },
    tempDirName: options.sandboxDir,
    cleanTempDir: true,
    // A copy, not Stryker's symlink: a confined agent (bwrap) sees only the
    // sandbox copy and Deno's cache, so a `node_modules` linking out of the
    // sandbox would be missing in there.
    symlinkNodeModules: false,
    // `chmod`: tests that start the runner as `nobody` need to pass through
    // the sandbox copy, which Stryker makes private (`mkdtemp`). Stryker
    // splits the command at spaces (no shell): the script's are escaped.
    buildCommand: `sh -c ${
      `cp -a '${join(ROOT, "node_modules")}' node_modules && chmod o+x . ..`
        .replaceAll(" ", "\\ ")
    }`,
  };
}

/** Counts the mutants of `module` in a Stryker JSON report. */
function scoreOf(module: string, reportFile: string): Score {
  const report = JSON.parse(Deno.readTextFileSync(reportFile));
  const score: Score = {
    module,
    killed: 0,
    survived: 0,
    timeout: 0,
    noCoverage: 0,
    errors: 0,
  };
  for (
    const file of Object.values(report.files) as {
      mutants: { status: string }[];
    }[]
  ) {
    for (const mutant of file.mutants) {
      if (mutant.status === "Killed") score.killed++;
      else if (mutant.status === "Survived") score.survived++;
      else if (mutant.status === "Timeout") score.timeout++;
      else if (mutant.status === "NoCoverage") score.noCoverage++;
      else if (mutant.status !== "Ignored") score.errors++;
    }
  }
  return score;
}

/** Runs Stryker on one module; its score (undefined: Stryker failed). */
async function mutateModule(
  module: string,
  tests: string[],
  options: { concurrency: number; timeoutMs: number },
): Promise<Score | undefined> {
  const reportDir = join(
    ROOT,
    "reports",
    "mutation",
    module.replace(/^lib\//, "").replace(/\.ts(:|$)/, "$1").replaceAll(
      /[/:]/g,
      "_",
    ),
  );
  const work = await Deno.makeTempDir({ prefix: "runner-mutate-" });
  try {
    const configFile = join(work, "stryker.config.json");
    const tmp = join(work, "tmp");
    await Deno.mkdir(tmp);
    await Deno.writeTextFile(
      configFile,
      JSON.stringify(
        strykerConfig(module, tests, {
          reportDir,
          sandboxDir: join(work, "sandbox"),
          ...options,
        }),
        null,
        2,
      ),
    );
    console.log(`\n== ${module}: its mutants against ${tests.join(" ")}`);
    const status = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", STRYKER, "run", configFile],
      cwd: ROOT,
      // The tests' own temporary files stay in this run's directory.
      env: { TMPDIR: tmp },
      stdout: "inherit",
      stderr: "inherit",
    }).spawn().status;
    if (!status.success) return undefined;
    return scoreOf(module, join(reportDir, "report.json"));
  } finally {
    await Deno.remove(work, { recursive: true }).catch(() => {});
  }
}

function percent(score: Score): string {
  const all = score.killed + score.timeout + score.survived + score.noCoverage;
  if (!all) return "-";
  return `${(((score.killed + score.timeout) / all) * 100).toFixed(1)}%`;
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    args: Deno.args,
    allowPositionals: true,
    options: {
      tests: { type: "string" },
      concurrency: { type: "string", default: "1" },
      "timeout-ms": { type: "string", default: "120000" },
      list: { type: "boolean", default: false },
    },
  });
  if (values.list) {
    for (const entry of GUARD_MODULES) {
      console.log(`${entry.module}\t${entry.tests.join(" ")}`);
    }
    return 0;
  }
  // `lib/x.ts:40-90`: only the mutants on those lines (Stryker's ranges).
  const modules = positionals.length
    ? positionals.map((arg) => {
      const [, path, lines] = /^(.*?)(:\d+-\d+)?$/.exec(arg)!;
      return relative(ROOT, resolve(path)) + (lines ?? "");
    })
    : GUARD_MODULES.map((entry) => entry.module);
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) {
    console.error("mutate: --concurrency must be a whole number ≥ 1");
    return 2;
  }
  const timeoutMs = Number(values["timeout-ms"]);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1000) {
    console.error("mutate: --timeout-ms must be a whole number ≥ 1000");
    return 2;
  }
  const plan = modules.map((module) => ({
    module,
    tests: values.tests
      ? values.tests.split(",")
      : testsFor(module.replace(/:\d+-\d+$/, "")),
  }));
  for (const { module, tests } of plan) {
    for (const path of [module.replace(/:\d+-\d+$/, ""), ...tests]) {
      try {
        Deno.statSync(join(ROOT, path));
      } catch {
        console.error(
          `mutate: ${path} does not exist (update scripts/mutation_modules.ts)`,
        );
        return 2;
      }
    }
  }
  const scores: Score[] = [];
  let failed = 0;
  for (const { module, tests } of plan) {
    const score = await mutateModule(module, tests, {
      concurrency,
      timeoutMs,
    });
    if (score) scores.push(score);
    else {
      console.error(`mutate: Stryker failed on ${module}`);
      failed++;
    }
  }
  console.log("\nmodule\tkilled/all\tscore\tsurvived\ttimeout\terrors");
  for (const score of scores) {
    const detected = score.killed + score.timeout;
    const all = detected + score.survived + score.noCoverage;
    console.log(
      `${score.module}\t${detected}/${all}\t${
        percent(score)
      }\t${score.survived}\t${score.timeout}\t${score.errors}`,
    );
  }
  console.log("reports: reports/mutation/<module>/index.html");
  return failed ? 1 : 0;
}

Deno.exit(await main());
