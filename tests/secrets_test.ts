/**
 * Which values are secrets: the name list, the never-list, the operator's
 * list, paths, and the runner's own tokens. Each part of the rule has a case
 * here that fails if that part changes.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { RunnerError } from "../lib/errors.ts";
import {
  createStreamRedactor,
  redactDeep,
  redactSecrets,
  secretsOf,
} from "../lib/secrets.ts";
import { resolveCallerConfig } from "../lib/server/policy.ts";
import { prepareAgentCommand } from "../lib/providers.ts";
import {
  customRunArgs,
  fixtureCommand,
  fixtureRunArgs,
  runCli,
  tempDir,
} from "./helpers.ts";
import { assertStreamShows } from "./redactor_helpers.ts";

/** One name per fragment of the rule (`*KEY*`, `*TOKEN*`, …), any case. */
const SECRET_NAMES = [
  "OPENAI_API_KEY",
  "GH_TOKEN",
  "CLIENT_SECRET",
  "DB_PASSWORD",
  "MYSQL_PASSWD",
  "SSH_PASSPHRASE",
  "PROXY_AUTH",
  "AWS_CREDENTIALS_BLOB",
  "PRIVATE_PEM",
  "SITE_COOKIE",
  "BROWSER_SESSION",
  "lowercase_api_key",
];

/** Names whose values are never secret, listed by the operator or not. */
const NEVER = [
  "HOME",
  "PATH",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TERM",
  "TMPDIR",
  "TMP",
  "TEMP",
  "PWD",
  "LC_ALL",
];

Deno.test("a value is secret when its name contains a secret word, in env-json or the runner's environment", () => {
  for (const name of SECRET_NAMES) {
    const value = `value-of-${name}`;
    assert.deepEqual(secretsOf({ envJson: { [name]: value } }), [value], name);
    assert.deepEqual(
      secretsOf({ environment: { [name]: value } }),
      [value],
      name,
    );
  }
});

Deno.test("values under ordinary names are not secrets, however long", () => {
  assert.deepEqual(
    secretsOf({
      envJson: {
        MODE: "echo",
        REGION: "europe-west1-long-value",
        PROJECT_DIR: "/nonexistent/projects/alpha",
        GEMINI_MODEL: "gemini-2.5-pro",
      },
    }),
    [],
  );
});

Deno.test("HOME, PATH, USER, SHELL, LANG, TMPDIR (and the rest of the never-list) are never secret, even when the operator lists them", () => {
  for (const name of NEVER) {
    const value = `/nonexistent/value/of/${name}`;
    assert.deepEqual(
      secretsOf({ envJson: { [name]: value }, secretNames: [name] }),
      [],
      name,
    );
    assert.deepEqual(
      secretsOf({ environment: { [name]: value }, secretNames: [name] }),
      [],
      name,
    );
  }
});

Deno.test("the operator's secret-env-names make any other name secret", () => {
  const envJson = { CORP_THING: "corp-value-1", OTHER: "other-value-2" };
  assert.deepEqual(secretsOf({ envJson }), []);
  assert.deepEqual(secretsOf({ envJson, secretNames: ["CORP_THING"] }), [
    "corp-value-1",
  ]);
  assert.deepEqual(
    secretsOf({ environment: envJson, secretNames: ["OTHER"] }),
    ["other-value-2"],
  );
});

Deno.test("an existing path under a secret name is not a secret; a credential that only starts with / is", () => {
  const dir = tempDir();
  const file = join(dir, "application_default_credentials.json");
  Deno.writeTextFileSync(file, "{}");
  assert.deepEqual(
    secretsOf({ envJson: { GOOGLE_APPLICATION_CREDENTIALS: file } }),
    [],
  );
  assert.deepEqual(
    secretsOf({
      envJson: { SSH_AUTH_SOCK: "~/agent.sock" },
      environment: { HOME: dir },
    }),
    ["~/agent.sock"],
    "a ~/ path that does not exist stays secret",
  );
  Deno.writeTextFileSync(join(dir, "agent.sock"), "");
  assert.deepEqual(
    secretsOf({
      envJson: { SSH_AUTH_SOCK: "~/agent.sock" },
      environment: { HOME: dir },
    }),
    [],
  );
  const base64 = "/K7MDENG/bPxRfiCYEXAMPLEKEY";
  assert.deepEqual(
    secretsOf({ envJson: { AWS_SECRET_ACCESS_KEY: base64 } }),
    [base64],
  );
});

Deno.test("switches and values shorter than 4 characters are not secrets; the runner's own tokens always are", () => {
  assert.deepEqual(
    secretsOf({
      envJson: { USE_AUTH: "true", KEY_ID: "abc", TOKEN_OFF: "False" },
    }),
    [],
  );
  assert.deepEqual(
    secretsOf({
      envJson: { HOME: "/home/me" },
      extra: ["api-token-value", undefined],
    }),
    ["api-token-value"],
  );
});

Deno.test("a run's answer keeps HOME paths and ordinary values, and redacts secret-named and operator-listed values", async () => {
  const home = tempDir();
  const env = {
    HOME: home,
    PLAIN_SETTING: "plain-long-value-99",
    OPENAI_API_KEY: "sk-test-1234567890",
    CORP_THING: "corp-value-123",
  };
  const result = await runCli(
    customRunArgs(fixtureCommand(), join(home, "proj"), [
      ...["--data-dir", tempDir()],
      ...["--env-json", JSON.stringify(env)],
      ...["--secret-env-names", "CORP_THING"],
      `see ${home}/proj ${env.PLAIN_SETTING} ${env.OPENAI_API_KEY} ${env.CORP_THING}`,
    ]),
  );
  assert.equal(result.code, 0, result.stderr);
  assert.equal(
    result.stdout,
    `echo: see ${home}/proj plain-long-value-99 [REDACTED] [REDACTED] (turn 1)\n`,
  );
});

Deno.test("secret-env-names is the operator's: a serve default applies to every run, and a caller cannot change it", () => {
  const serve = {
    allowCustomCommands: false,
    allowEnvNames: ["CORP_THING"],
    runDefaults: { "secret-env-names": "CORP_THING" },
  };
  const config = resolveCallerConfig(serve, {
    provider: "codex",
    workspace: tempDir(),
    "env-json": { CORP_THING: "corp-value-123" },
  });
  assert.deepEqual(config.secretEnvNames, ["CORP_THING"]);
  assert.ok(prepareAgentCommand(config).secrets.includes("corp-value-123"));
  assert.throws(
    () =>
      resolveCallerConfig(serve, {
        provider: "codex",
        workspace: tempDir(),
        "secret-env-names": [],
      }),
    (error) => {
      assert.ok(error instanceof RunnerError);
      assert.equal(error.code, "http.forbidden");
      assert.match(
        error.message,
        /secret-env-names can only be set by the operator/,
      );
      return true;
    },
  );
});

/** A secret and a longer one that contains it, as an operator might have. */
const SHORT_SECRET = "abcd1234";
const LONG_SECRET = "abcd1234-rest-of-the-longer-key";

Deno.test("a secret that contains a shorter one is redacted whole: no rest of it shows, in any order of the list", () => {
  const text = `long ${LONG_SECRET} short ${SHORT_SECRET} end`;
  const expected = "long [REDACTED] short [REDACTED] end";
  for (
    const secrets of [[SHORT_SECRET, LONG_SECRET], [LONG_SECRET, SHORT_SECRET]]
  ) {
    assert.equal(redactSecrets(text, secrets), expected);
    assert.deepEqual(redactDeep({ a: [text] }, secrets), { a: [expected] });
    const stream = createStreamRedactor(secrets);
    const pieces = [...text].map((char) => stream.push(char)).join("");
    assert.equal(pieces + stream.end(), expected);
  }
});

Deno.test("runner run: an env-json secret containing a shorter one never shows its rest in the answer", async () => {
  const result = await runCli(fixtureRunArgs(
    [],
    "--env-json",
    JSON.stringify({ SHORT_TOKEN: SHORT_SECRET, LONG_API_KEY: LONG_SECRET }),
    `long ${LONG_SECRET} short ${SHORT_SECRET}`,
  ));
  assert.equal(result.code, 0, result.stderr);
  assert.equal(
    result.stdout,
    "echo: long [REDACTED] short [REDACTED] (turn 1)\n",
  );
});

Deno.test("a stream shows text as soon as it cannot be the start of a secret, and holds back only a possible start", () => {
  const stream = createStreamRedactor(["secret1"]);
  assert.equal(stream.push("hello sec"), "hello ");
  assert.equal(stream.push("ret1 bye"), "[REDACTED] bye");
  assert.equal(stream.push("say s"), "say ");
  assert.equal(stream.push("x"), "sx", "a false start is shown once it is one");
  // At most the secret's length − 1 is held back.
  assert.equal(stream.push("sssssss"), "ssssss");
  assert.equal(stream.end(), "s");
  assert.equal(stream.end(), "", "what end() returned is not returned again");
  assert.equal(stream.push("secret1"), "[REDACTED]");
  assert.equal(stream.end(), "");
});

Deno.test("a stream never shows any piece of a secret, cut anywhere, also one a shorter secret starts", () => {
  const long = "tok-0123456789";
  const secrets = ["tok-", long, "zz9q"];
  const text = `a ${long} b tok- c zz9q d`;
  for (let one = 1; one < text.length; one++) {
    for (let two = one; two < text.length; two++) {
      const stream = createStreamRedactor(secrets);
      const pieces = [
        stream.push(text.slice(0, one)),
        stream.push(text.slice(one, two)),
        stream.push(text.slice(two)),
        stream.end(),
      ];
      const cut = `cut at ${one} and ${two}`;
      assert.equal(
        pieces.join(""),
        "a [REDACTED] b [REDACTED] c [REDACTED] d",
        cut,
      );
      for (const piece of pieces) {
        assert.doesNotMatch(piece, /tok|0123|zz9/, cut);
      }
    }
  }
});

Deno.test("secrets that repeat and overlap over one cut are redacted as in the whole text", () => {
  // The whole text: "x abcabc-keyabc-key abc-".
  assertStreamShows(["abcabc-key", "abc-"], [
    ["x abcabc-keyabc", "x [REDACTED]"],
    ["-key abc-", "[REDACTED]key [REDACTED]"],
  ]);
});

Deno.test("values shorter than 4 characters are neither redacted nor held back in a stream", () => {
  assertStreamShows(["abc", "abc"], [["xab", "xab"], ["c abc", "c abc"]]);
  assert.equal(redactSecrets("abc abcd", ["abc", "abcd"]), "abc [REDACTED]");
  assert.deepEqual(redactDeep({ a: "abc" }, ["abc"]), { a: "abc" });
});

Deno.test("a stream never cuts an emoji in half, secrets or not; a whole pair at the cut is not held", () => {
  // A text that ends cut keeps its end.
  assertStreamShows(["zzzz-secret"], [
    ["ab\ud83d", "ab"],
    ["\ude00", "\ud83d\ude00"],
    // The first and the last high surrogates, U+10000 and U+10FFFF.
    ["\ud800", ""],
    ["\udc00\udbff", "\ud800\udc00"],
    ["\udfff", "\udbff\udfff"],
    ["z\ud83d\ude00", "z\ud83d\ude00"],
    ["zz", ""],
    ["\ud83d", "zz"],
  ], "\ud83d");
  assertStreamShows([], [
    ["\ud800\udc00", "\ud800\udc00"],
    ["\udbff", ""],
    ["\udfff.", "\udbff\udfff."],
  ]);
});

Deno.test("redactDeep redacts every string in objects and arrays, and keeps other values as they are", () => {
  const value = {
    text: "key=hunter22",
    list: ["hunter22", 7, null, true, { inner: "x hunter22 y" }],
    number: 1.5,
    missing: null,
  };
  assert.deepEqual(redactDeep(value, ["hunter22"]), {
    text: "key=[REDACTED]",
    list: ["[REDACTED]", 7, null, true, { inner: "x [REDACTED] y" }],
    number: 1.5,
    missing: null,
  });
  assert.deepEqual(redactDeep(value, []), value);
  assert.equal(redactDeep("hunter22", ["hunter22"]), "[REDACTED]");
});

Deno.test("under a secret name a 4-character value, a padded or upper-case switch word, and a relative file name are still judged right", () => {
  assert.deepEqual(secretsOf({ envJson: { API_KEY: "abcd" } }), ["abcd"]);
  assert.deepEqual(
    secretsOf({ envJson: { USE_AUTH: " TRUE ", OLD_TOKEN: "None" } }),
    [],
  );
  // Only an absolute (or ~/) path counts as a path: a relative name that
  // happens to exist here is still a secret.
  assert.deepEqual(secretsOf({ envJson: { API_KEY: "deno.json" } }), [
    "deno.json",
  ]);
});

Deno.test("an existing absolute path under a secret name is not a secret when HOME is set too", () => {
  const dir = tempDir();
  const file = join(dir, "credentials.json");
  Deno.writeTextFileSync(file, "{}");
  assert.deepEqual(
    secretsOf({
      envJson: { GOOGLE_APPLICATION_CREDENTIALS: file },
      environment: { HOME: tempDir() },
    }),
    [],
  );
});

Deno.test("a stream holds back from the earliest possible start of any secret, not the latest", () => {
  assertStreamShows(["abcdefgh", "efgz"], [
    ["x abcdefg", "x "],
    ["h y", "[REDACTED] y"],
  ]);
});

Deno.test("a stream never cuts inside a whole secret where a later one may start", () => {
  // "3456" may start "3456zz", but it ends the whole "key-123456".
  for (const before of ["x ", ""]) {
    assertStreamShows(["key-123456", "3456zz"], [
      [`${before}key-123456`, before],
      [" y", "[REDACTED] y"],
    ]);
  }
  // Moving the cut before one whole secret can put it inside another.
  // The two overlap: redacted as one, no piece of either shows.
  assertStreamShows(
    ["QRSTUVWX-ke", "key-123456", "3456zz"],
    [["_ QRSTUVWX-key-123456", "_ "]],
    "[REDACTED]",
  );
});

Deno.test("switch words are not secrets in any case: NULL too", () => {
  assert.deepEqual(secretsOf({ envJson: { API_TOKEN: "NULL" } }), []);
});
