/**
 * What a client terminal's command really runs, as the permission rules see
 * it (`commandLayers`): each wrapper the runner can read and the command
 * behind it, with every variable set so far, and where the runner cannot
 * know what runs next, the layers ending unknown (so no allowing rule can
 * match). The wrappers and interpreters are fake files on a `PATH` of the
 * test's own, so what the host has installed does not matter. End to end
 * (no smuggled command starts): `tests/security/terminal_argv_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  type CommandLayers,
  commandLayers,
  isProgramNamed,
} from "../../lib/run/command_layers.ts";
import { tempDir } from "../helpers.ts";

const PROGRAMS = [
  "env",
  "nice",
  "nohup",
  "timeout",
  "xargs",
  "sh",
  "bash",
  "dash",
  "zsh",
  "ksh",
  "mksh",
  "ash",
  "rbash",
  "node",
  "nodejs",
  "perl",
  "ruby",
  "php",
  "python3",
  "python3.11",
  "git",
  "cat",
  // Some systems have these as files too; a wrapper starts them as files.
  "command",
  "time",
];

/** A workspace with a `bin` of fake programs, the agent's whole `PATH`. */
function machine() {
  const dir = Deno.realPathSync(tempDir());
  const bin = join(dir, "bin");
  Deno.mkdirSync(bin);
  for (const name of PROGRAMS) {
    Deno.writeTextFileSync(join(bin, name), "#!/bin/sh\n");
    Deno.chmodSync(join(bin, name), 0o755);
  }
  const cwd = join(dir, "ws");
  Deno.mkdirSync(cwd);
  return { dir, bin, cwd };
}

const { dir: DIR, bin: BIN, cwd: CWD } = machine();

interface Call {
  /** The request's variables. */
  env?: Record<string, string>;
  /** The agent's `PATH` (default: the fake `bin`). */
  agentPath?: string;
  /** The file started (default: the command's name on the fake `bin`). */
  program?: string;
}

/**
 * The layers of `command args…` in one line each, `|` between them:
 * variables, then the name (`?` before it when the file is unknown, `<file>`
 * when it is not the name's file on the fake `bin`), then the arguments, `…`
 * when unseen arguments follow; a last `| ?` when what runs is unknown.
 */
function layers(words: string[], call: Call = {}): string {
  const [command, ...args] = words;
  const agentPath = "agentPath" in call ? call.agentPath : BIN;
  const found: CommandLayers = commandLayers({
    command,
    program: call.program ?? join(BIN, command),
    args,
    env: Object.entries(call.env ?? {}).map(([name, value]) => ({
      name,
      value,
    })),
    agentPath,
    cwd: CWD,
  });
  assert.equal(found.agentPath, agentPath);
  return found.layers.map((layer) => {
    const file = layer.program === undefined
      ? "?"
      : layer.program === join(BIN, layer.name) && !layer.name.includes("/")
      ? ""
      : `<${layer.program.replace(DIR, "~")}>`;
    return [
      ...layer.env.map((entry) => `${entry.name}=${entry.value}`),
      file + layer.name,
      ...layer.args,
    ].join(" ") + (layer.openArgs ? " …" : "");
  }).join(" | ") + (found.known ? "" : " | ?");
}

/** Fails unless each `[words, layers]` case reads as said. */
function assertLayers(cases: [string[], string][], call?: Call): void {
  assert.deepEqual(
    cases.map(([words]) => [words, layers(words, call)]),
    cases,
  );
}

Deno.test("a program that is no wrapper is what runs; env's variables and program are read, an option it does not know ends the layers unknown", () => {
  assertLayers([
    [["git", "status"], "git status"],
    [
      ["env", "A=1", "B=x=y", "git", "status"],
      "env A=1 B=x=y git status | A=1 B=x=y git status",
    ],
    [["env", "--", "A=1", "git"], "env -- A=1 git | A=1 git"],
    [["env", "A=1"], "env A=1"],
    [["env"], "env"],
    [["env", "-u", "HOME", "git"], "env -u HOME git | ?"],
    [["env", "--unset=HOME", "git"], "env --unset=HOME git | ?"],
    [["env", "=x", "git"], "env =x git | ?"],
    [["env", "A=1", "=x", "git"], "env A=1 =x git | ?"],
  ]);
});

Deno.test("env -i (or -, --ignore-environment) empties the PATH: the program behind it is unknown unless env sets the agent's PATH itself", () => {
  assertLayers([
    [["env", "-i", "git", "status"], "env -i git status | ?git status | ?"],
    [["env", "-", "git"], "env - git | ?git | ?"],
    [
      ["env", "--ignore-environment", "git"],
      "env --ignore-environment git | ?git | ?",
    ],
    [
      ["env", "-i", `PATH=${BIN}`, "git"],
      `env -i PATH=${BIN} git | PATH=${BIN} git`,
    ],
    [
      ["env", "-i", "/usr/bin/git"],
      "env -i /usr/bin/git | </usr/bin/git>/usr/bin/git",
    ],
  ]);
});

Deno.test("a PATH the command sets, or an agent PATH with a relative entry, makes a bare name unknown; a path is the file it names from the cwd", () => {
  assertLayers([
    [
      ["env", "PATH=/elsewhere", "git"],
      "env PATH=/elsewhere git | PATH=/elsewhere ?git | ?",
    ],
    [["env", "./tool"], "env ./tool | ?./tool | ?"],
  ]);
  Deno.writeTextFileSync(join(CWD, "tool"), "#!/bin/sh\n");
  Deno.chmodSync(join(CWD, "tool"), 0o755);
  assertLayers([
    [["env", "./tool", "x"], "env ./tool x | <~/ws/tool>./tool x"],
    [["nice", "../bin/git"], "nice ../bin/git | <~/bin/git>../bin/git"],
  ]);
  // The request's own PATH: the agent's unchanged is still the agent's.
  assertLayers([[
    ["env", "git"],
    "PATH=/elsewhere env git | PATH=/elsewhere ?git | ?",
  ]], {
    env: { PATH: "/elsewhere" },
  });
  assertLayers([[["env", "git"], `PATH=${BIN} env git | PATH=${BIN} git`]], {
    env: { PATH: BIN },
  });
  assertLayers([[["env", "git"], "env git | ?git | ?"]], {
    agentPath: `bin:${BIN}`,
    program: join(BIN, "env"),
  });
  assertLayers([[["env", "git"], "env git | ?git | ?"]], {
    agentPath: `${BIN}:`,
    program: join(BIN, "env"),
  });
});

Deno.test("nice with each form of its adjustment; another option ends the layers unknown", () => {
  assertLayers([
    [["nice", "git"], "nice git | git"],
    [["nice"], "nice"],
    [["nice", "-n", "5", "git"], "nice -n 5 git | git"],
    [["nice", "-n", "10", "git"], "nice -n 10 git | git"],
    [["nice", "-n10", "git"], "nice -n10 git | git"],
    [["nice", "--adjustment=10", "git"], "nice --adjustment=10 git | git"],
    [["nice", "-10", "git"], "nice -10 git | git"],
    // What runs is the first word that is no option, whatever follows it.
    [["nice", "git", "5", "x"], "nice git 5 x | git 5 x"],
    [["nice", "x-n5", "git"], "nice x-n5 git | ?x-n5 git | ?"],
    [["nice", "x-5", "git"], "nice x-5 git | ?x-5 git | ?"],
    [["nice", "-n", "-5", "git"], "nice -n -5 git | git"],
    [["nice", "-n", "+5", "git"], "nice -n +5 git | git"],
    [["nice", "--adjustment", "5", "git"], "nice --adjustment 5 git | git"],
    [["nice", "-n5", "git"], "nice -n5 git | git"],
    [["nice", "-n-5", "git"], "nice -n-5 git | git"],
    [["nice", "--adjustment=5", "git"], "nice --adjustment=5 git | git"],
    [["nice", "--adjustment=-5", "git"], "nice --adjustment=-5 git | git"],
    [["nice", "-5", "git"], "nice -5 git | git"],
    [["nice", "--", "git"], "nice -- git | git"],
    [["nice", "-n", "5", "--", "git"], "nice -n 5 -- git | git"],
    [["nice", "-n", "x", "git"], "nice -n x git | ?"],
    [["nice", "-n", "5x", "git"], "nice -n 5x git | ?"],
    [["nice", "-n", "x5", "git"], "nice -n x5 git | ?"],
    [["nice", "-n"], "nice -n | ?"],
    [["nice", "-n5x", "git"], "nice -n5x git | ?"],
    [["nice", "-nx5", "git"], "nice -nx5 git | ?"],
    [["nice", "--adjustment=5x", "git"], "nice --adjustment=5x git | ?"],
    [
      ["nice", "x--adjustment=5", "git"],
      "nice x--adjustment=5 git | ?x--adjustment=5 git | ?",
    ],
    [["nice", "-5x", "git"], "nice -5x git | ?"],
    [["nice", "-x5", "git"], "nice -x5 git | ?"],
    [["nice", "-x", "git"], "nice -x git | ?"],
    [["nice", "-n", "5", "-x", "git"], "nice -n 5 -x git | ?"],
  ]);
});

Deno.test("nohup, and exec and command inside a script, take no options; with one the layers end unknown", () => {
  assertLayers([
    [["nohup", "git", "status"], "nohup git status | git status"],
    [["nohup", "--", "git"], "nohup -- git | git"],
    [["nohup"], "nohup"],
    [["nohup", "--", "-x"], "nohup -- -x | ?"],
    [["nohup", "-p", "git"], "nohup -p git | ?"],
    [
      ["sh", "-c", "exec git status"],
      "sh -c exec git status | <exec>exec git status | git status",
    ],
    [
      ["sh", "-c", "command git"],
      "sh -c command git | <command>command git | git",
    ],
    [
      ["sh", "-c", "exec -a x git"],
      "sh -c exec -a x git | <exec>exec -a x git | ?",
    ],
    [
      ["sh", "-c", "command -p git"],
      "sh -c command -p git | <command>command -p git | ?",
    ],
    // Outside a script they are programs, looked up like any other.
    [["nice", "exec", "git"], "nice exec git | ?exec git | ?"],
    [["nice", "command", "git"], "nice command git | command git"],
    // A file named command is a program, not the shell's builtin.
    [["command", "git"], "command git"],
    [["command", "-v", "git"], "command -v git"],
    // Nor is a shell's own word looked up as a program behind a wrapper.
    [["nice", "time", "git"], "nice time git | ?time git | ?"],
    [
      ["sh", "-c", "nice exec git"],
      "sh -c nice exec git | nice exec git | ?exec git | ?",
    ],
  ]);
});

Deno.test("timeout with each option it has and a duration; anything else ends the layers unknown", () => {
  assertLayers([
    [["timeout", "5", "git"], "timeout 5 git | git"],
    [["timeout", "1.5m", "git"], "timeout 1.5m git | git"],
    [["timeout", "10", "git"], "timeout 10 git | git"],
    [["timeout", "1.25", "git"], "timeout 1.25 git | git"],
    [["timeout", "2d", "git"], "timeout 2d git | git"],
    [["timeout", "-s", "KILL", "5", "git"], "timeout -s KILL 5 git | git"],
    [
      ["timeout", "--signal", "KILL", "5", "git"],
      "timeout --signal KILL 5 git | git",
    ],
    [["timeout", "-k", "1", "5", "git"], "timeout -k 1 5 git | git"],
    [
      ["timeout", "--kill-after", "1", "5", "git"],
      "timeout --kill-after 1 5 git | git",
    ],
    [["timeout", "-sKILL", "5", "git"], "timeout -sKILL 5 git | git"],
    [["timeout", "-k1", "5", "git"], "timeout -k1 5 git | git"],
    [
      ["timeout", "--signal=KILL", "5", "git"],
      "timeout --signal=KILL 5 git | git",
    ],
    [
      ["timeout", "--kill-after=1", "5", "git"],
      "timeout --kill-after=1 5 git | git",
    ],
    [
      ["timeout", "--preserve-status", "5", "git"],
      "timeout --preserve-status 5 git | git",
    ],
    [
      ["timeout", "--foreground", "5", "git"],
      "timeout --foreground 5 git | git",
    ],
    [["timeout", "-v", "5", "git"], "timeout -v 5 git | git"],
    [["timeout", "--verbose", "5", "git"], "timeout --verbose 5 git | git"],
    [["timeout", "--", "5", "git"], "timeout -- 5 git | git"],
    [["timeout", "-s"], "timeout -s | ?"],
    [["timeout", "-x", "5", "git"], "timeout -x 5 git | ?"],
    [
      ["timeout", "-s", "KILL", "-x", "5", "git"],
      "timeout -s KILL -x 5 git | ?",
    ],
    [["timeout", "-", "5", "git"], "timeout - 5 git | ?"],
    [["timeout", "--signalx", "5", "git"], "timeout --signalx 5 git | ?"],
    [["timeout", "x-sKILL", "5", "git"], "timeout x-sKILL 5 git | ?"],
    [["timeout", "five", "git"], "timeout five git | ?"],
    [["timeout", "5x", "git"], "timeout 5x git | ?"],
    [["timeout", "x5", "git"], "timeout x5 git | ?"],
    [["timeout", "5.", "git"], "timeout 5. git | ?"],
    [["timeout", "1.5ms", "git"], "timeout 1.5ms git | ?"],
    [["timeout", "5"], "timeout 5 | ?"],
    [["timeout"], "timeout | ?"],
  ]);
});

Deno.test("xargs: arguments the runner cannot see follow its program's, and every layer behind it", () => {
  assertLayers([
    [["xargs", "git", "add"], "xargs git add | git add …"],
    [["xargs", "-r", "git"], "xargs -r git | git …"],
    [
      ["xargs", "--no-run-if-empty", "git"],
      "xargs --no-run-if-empty git | git …",
    ],
    [["xargs", "--", "git"], "xargs -- git | git …"],
    [["xargs", "nice", "git"], "xargs nice git | nice git … | git …"],
    [["nice", "xargs", "git"], "nice xargs git | xargs git | git …"],
    [["xargs", "-n1", "git"], "xargs -n1 git | ?"],
    [["xargs", "-r", "-I{}", "git"], "xargs -r -I{} git | ?"],
    [["xargs"], "xargs | ?"],
    [["xargs", "-r"], "xargs -r | ?"],
  ]);
});

Deno.test("a shell's -c script of one plain command is read, with its variables; anything else in a shell is unknown, and a shell running a file is what runs", () => {
  assertLayers([
    [["sh", "-c", "git status"], "sh -c git status | git status"],
    [
      ["bash", "-c", "A=1 git status"],
      "bash -c A=1 git status | A=1 git status",
    ],
    [["dash", "-ec", "git"], "dash -ec git | git"],
    [
      ["sh", "-e", "-u", "-x", "-v", "-c", "git"],
      "sh -e -u -x -v -c git | git",
    ],
    [["sh", "-cx", "git"], "sh -cx git | git"],
    [["sh", "-c", "--", "git"], "sh -c -- git | git"],
    [["sh", "-c", "-", "git"], "sh -c - git | git"],
    [
      ["sh", "-c", "git status", "name", "x"],
      "sh -c git status name x | git status",
    ],
    [["sh", "-c"], "sh -c | ?"],
    [["sh", "-c", "--"], "sh -c -- | ?"],
    [["sh", "-c", "git; id"], "sh -c git; id | ?"],
    [["sh", "-c", "git $X"], "sh -c git $X | ?"],
    [["sh", "-o", "errexit", "-c", "git"], "sh -o errexit -c git"],
    [["sh", "-oc", "git"], "sh -oc git | ?"],
    [["sh", "+x", "-c", "git"], "sh +x -c git | ?"],
    [["sh", "+-x", "-c", "git"], "sh +-x -c git | ?"],
    // A login shell reads its profile first: unknown.
    [["bash", "-lc", "git"], "bash -lc git | ?"],
    [["bash", "-cl", "git"], "bash -cl git | ?"],
    [["zsh", "-c", "git"], "zsh -c git | git"],
    [["ksh", "-c", "git"], "ksh -c git | git"],
    [["mksh", "-c", "git"], "mksh -c git | git"],
    [["ash", "-c", "git"], "ash -c git | git"],
    [["rbash", "-c", "git"], "rbash -c git | git"],
    [["sh", "-c", "+x", "git"], "sh -c +x git | ?"],
    [["sh", "--norc", "-c", "git"], "sh --norc -c git | ?"],
    [["sh", "--", "-c", "git"], "sh -- -c git"],
    [["sh", "script.sh"], "sh script.sh"],
    [["sh", "-e", "script.sh"], "sh -e script.sh"],
    [["sh"], "sh"],
    [["sh", "-c", "eval git"], "sh -c eval git | ?"],
    [["sh", "-c", "PATH=/x git"], "sh -c PATH=/x git | PATH=/x ?git | ?"],
    [
      ["sh", "-c", "env A=1 sh -c 'B=2 git s'"],
      "sh -c env A=1 sh -c 'B=2 git s' | env A=1 sh -c B=2 git s | A=1 sh -c B=2 git s | A=1 B=2 git s",
    ],
  ]);
});

Deno.test("an interpreter given inline code is unknown, in any argument; running a file it is what runs", () => {
  assertLayers([
    [["node", "app.js"], "node app.js"],
    [["node", "--inspect", "app.js"], "node --inspect app.js"],
    [
      ["node", "--evaluate-nothing", "app.js"],
      "node --evaluate-nothing app.js",
    ],
    [["node", "app.js", "x-e"], "node app.js x-e"],
    [["node", "-e", "x"], "node -e x | ?"],
    [["node", "-p", "x"], "node -p x | ?"],
    [["node", "-pe", "x"], "node -pe x | ?"],
    [["node", "--no-warnings", "-e", "x"], "node --no-warnings -e x | ?"],
    [["node", "--eval", "x"], "node --eval x | ?"],
    [["node", "--eval=x"], "node --eval=x | ?"],
    [["node", "--print", "x"], "node --print x | ?"],
    [["node", "--import", "x"], "node --import x | ?"],
    [["node", "--require", "x"], "node --require x | ?"],
    [["node", "--loader", "x"], "node --loader x | ?"],
    [
      ["node", "--experimental-loader", "x"],
      "node --experimental-loader x | ?",
    ],
    [["nodejs", "-e", "x"], "nodejs -e x | ?"],
    [["nodejs", "--eval", "x"], "nodejs --eval x | ?"],
    [["nodejs", "--require=x", "app.js"], "nodejs --require=x app.js | ?"],
    [["nodejs", "app.js"], "nodejs app.js"],
    [["nodejs", "-ie", "x"], "nodejs -ie x | ?"],
    [["nodejs", "app.js", "x-e"], "nodejs app.js x-e"],
    [["perl", "-e", "x"], "perl -e x | ?"],
    [["perl", "-wE", "x"], "perl -wE x | ?"],
    [["perl", "-MPOSIX", "x.pl"], "perl -MPOSIX x.pl | ?"],
    [["perl", "-mPOSIX", "x.pl"], "perl -mPOSIX x.pl | ?"],
    [["perl", "-x", "x.pl"], "perl -x x.pl | ?"],
    [["perl", "-w", "x.pl"], "perl -w x.pl"],
    [["perl", "x.pl", "a-e"], "perl x.pl a-e"],
    [["perl", "--", "x.pl", "-e"], "perl -- x.pl -e | ?"],
    [["ruby", "-e", "x"], "ruby -e x | ?"],
    [["ruby", "-we", "x"], "ruby -we x | ?"],
    [["ruby", "x.rb"], "ruby x.rb"],
    [["ruby", "--enable=all", "x.rb"], "ruby --enable=all x.rb"],
    [["php", "-r", "x"], "php -r x | ?"],
    [["php", "-B", "x"], "php -B x | ?"],
    [["php", "-R", "x"], "php -R x | ?"],
    [["php", "-E", "x"], "php -E x | ?"],
    [["php", "-d", "x=1", "a.php"], "php -d x=1 a.php | ?"],
    [["php", "a.php"], "php a.php"],
    [["php", "-nr", "x"], "php -nr x | ?"],
    [["php", "a.php", "x-r"], "php a.php x-r"],
    [["python3", "-c", "x"], "python3 -c x | ?"],
    [["python3", "-Ic", "x"], "python3 -Ic x | ?"],
    [["python3.11", "-c", "x"], "python3.11 -c x | ?"],
    [["python3", "-m", "http.server"], "python3 -m http.server"],
    [
      ["python3", "--check-hash-based-pycs", "x.py"],
      "python3 --check-hash-based-pycs x.py",
    ],
    [["python3", "x.py"], "python3 x.py"],
  ]);
});

Deno.test("a wrapper is read only when it is the file its name finds on the agent's PATH, called by that name", () => {
  // A file named env that is not the agent's env: it is what runs.
  const fake = join(CWD, "env");
  Deno.writeTextFileSync(fake, "#!/bin/sh\n");
  Deno.chmodSync(fake, 0o755);
  assertLayers([[["env", "A=1", "git"], "<~/ws/env>env A=1 git"]], {
    program: fake,
  });
  // A link to the agent's env elsewhere is the agent's env.
  const link = join(DIR, "link");
  Deno.mkdirSync(link);
  Deno.symlinkSync(join(BIN, "env"), join(link, "env"));
  assertLayers([[["env", "A=1", "git"], "<~/link/env>env A=1 git | A=1 git"]], {
    program: join(link, "env"),
  });
  // The agent's env called by another name acts as that name.
  Deno.symlinkSync(join(BIN, "env"), join(link, "other"));
  assertLayers([[["other", "A=1", "git"], "<~/link/other>other A=1 git"]], {
    program: join(link, "other"),
  });
  // No env on the agent's PATH: the file is no wrapper.
  assertLayers([[["env", "A=1", "git"], "env A=1 git"]], {
    agentPath: join(DIR, "nothing"),
  });
  assertLayers([[["env", "A=1", "git"], "env A=1 git"]], {
    agentPath: undefined,
  });
  // A program that does not exist.
  assertLayers([[["env", "A=1", "git"], "<~/gone/env>env A=1 git"]], {
    program: join(DIR, "gone", "env"),
  });
  assert.equal(isProgramNamed(join(BIN, "git"), "git", BIN), true);
  assert.equal(isProgramNamed(join(BIN, "git"), "cat", BIN), false);
  assert.equal(isProgramNamed(join(link, "env"), "env", BIN), true);
  assert.equal(isProgramNamed(fake, "env", BIN), false);
  // A multi-call binary acts on the name it is called by.
  assert.equal(isProgramNamed(join(link, "other"), "env", BIN), false);
});

Deno.test("the request's variables, env's and a script's all reach every later layer, in order", () => {
  assertLayers([[
    ["env", "B=2", "sh", "-c", "C=3 nice git"],
    "A=1 env B=2 sh -c C=3 nice git | A=1 B=2 sh -c C=3 nice git | A=1 B=2 C=3 nice git | A=1 B=2 C=3 git",
  ]], { env: { A: "1" } });
});

Deno.test("at most 16 wrappers are looked through; what is behind more is unknown", () => {
  const fifteen = Array(15).fill("nice");
  assert.equal(
    layers([...fifteen, "git"]),
    [...fifteen.map((_, at) => [...fifteen.slice(at), "git"].join(" ")), "git"]
      .join(" | "),
  );
  const sixteen = Array(16).fill("nice");
  const read = layers([...sixteen, "git"]).split(" | ");
  assert.equal(read.length, 18);
  assert.equal(read.at(-2), "git");
  assert.equal(read.at(-1), "?");
});
