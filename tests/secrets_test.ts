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
