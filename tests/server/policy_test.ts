/**
 * `runner serve`'s caller policy as a caller reads it: which keys a request
 * may send at all (operator-only keys, command keys under
 * `--allow-custom-commands`, `env-json` names under `--allow-env-names`,
 * `provider=custom` and registry agents), what each refusal says and names,
 * and that a key sent as `null` is a key not sent. The floor under the keys
 * a caller may send is `tests/security/caller_floor_rules_test.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import { RunnerError } from "../../lib/errors.ts";
import {
  COMMAND_CONFIG_KEYS,
  resolveCallerConfig,
} from "../../lib/server/policy.ts";
import { tempDir } from "../helpers.ts";

const WORKSPACE = tempDir("policy-ws-");

function serve(
  runDefaults: Record<string, unknown> = {},
  options: { allowCustomCommands?: boolean; allowEnvNames?: string[] } = {},
) {
  return {
    allowCustomCommands: options.allowCustomCommands ?? false,
    allowEnvNames: options.allowEnvNames ?? [],
    runDefaults: { provider: "codex", workspace: WORKSPACE, ...runDefaults },
  };
}

/** The refusal as the caller reads it: code, message and detail. */
function refusal(
  config: ReturnType<typeof serve>,
  caller: Record<string, unknown>,
): { code: string; message: string; detail: unknown } | undefined {
  try {
    resolveCallerConfig(config, caller);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof RunnerError, String(error));
    return { code: error.code, message: error.message, detail: error.detail };
  }
}

const SSH = { location: "remote-ssh", "ssh-target": "runner@build-host" };

Deno.test("every key that chooses a command is refused as one, naming it, unless --allow-custom-commands", () => {
  const values: Record<string, Record<string, unknown>> = {
    "acp-command": { provider: "custom", "acp-command": "my-agent --acp" },
    "mcp-servers-json": { "mcp-servers-json": [] },
    "ssh-extra-options": { ...SSH, "ssh-extra-options": "-v" },
    "ssh-identity-file": { ...SSH, "ssh-identity-file": "/keys/id_ed25519" },
  };
  assert.deepEqual(Object.keys(values), [...COMMAND_CONFIG_KEYS]);
  for (const [key, caller] of Object.entries(values)) {
    assert.deepEqual(refusal(serve(), { [key]: caller[key] }), {
      code: "http.forbidden",
      message:
        `${key} chooses a command to execute; the server only accepts it when started with --allow-custom-commands.`,
      detail: { key },
    }, key);
    assert.equal(
      refusal(serve({}, { allowCustomCommands: true }), caller),
      undefined,
      key,
    );
  }
});

Deno.test("an operator-only key is refused naming it; an unknown key lists the keys a caller may send", () => {
  assert.deepEqual(refusal(serve(), { "workspace-roots": "/" }), {
    code: "http.forbidden",
    message:
      "workspace-roots can only be set by the operator (runner serve flags), not per request.",
    detail: { key: "workspace-roots" },
  });
  const unknown = refusal(serve(), { "no-such-key": 1 });
  assert.equal(unknown?.code, "config.invalid");
  assert.match(
    unknown?.message ?? "",
    /^no-such-key: unknown config key\. Known keys: provider, location, workspace, session-cwd, /,
  );
});

Deno.test("a key sent as null or undefined is a key not sent, even one a caller may never set", () => {
  for (const value of [null, undefined]) {
    const config = resolveCallerConfig(serve(), {
      "acp-command": value,
      "workspace-roots": value,
      model: value,
    });
    assert.equal(config.acpCommand, undefined, String(value));
    assert.deepEqual(config.workspaceRoots, [], String(value));
  }
});

Deno.test("provider=custom, however spaced, needs --allow-custom-commands; a registry agent must be the operator's own", () => {
  const custom =
    "provider=custom runs a caller-chosen command; the server only accepts it when started with --allow-custom-commands. Use a preset provider (GET /v1/providers).";
  for (const provider of ["custom", " custom ", "custom\t"]) {
    assert.deepEqual(refusal(serve(), { provider }), {
      code: "http.forbidden",
      message: custom,
      detail: { key: "provider" },
    }, JSON.stringify(provider));
  }
  assert.deepEqual(refusal(serve(), { provider: " some-registry-agent " }), {
    code: "http.forbidden",
    message:
      "provider=some-registry-agent names an agent of the ACP registry, which the operator has not chosen; the server accepts a registry agent per request only when it is the operator's own --provider, or when started with --allow-custom-commands. Use a preset provider (GET /v1/providers).",
    detail: { key: "provider" },
  });
  // The operator's own registry agent, however the caller spaces its name.
  const own = serve({ provider: "some-registry-agent" });
  for (const provider of ["some-registry-agent", " some-registry-agent "]) {
    assert.equal(refusal(own, { provider }), undefined, provider);
  }
});

Deno.test("env-json: names the operator did not allow are refused, listed with the allowed ones; allowed names merge over the operator's", () => {
  assert.deepEqual(
    refusal(serve({}, { allowEnvNames: ["HTTP_PROXY", "LANG"] }), {
      "env-json": { LANG: "C", AWS_SECRET: "x", LD_PRELOAD: "/x.so" },
    }),
    {
      code: "http.forbidden",
      message:
        "env-json: AWS_SECRET, LD_PRELOAD may not be set per request. The operator can allow names with --allow-env-names (allowed now: HTTP_PROXY, LANG).",
      detail: { key: "env-json", names: ["AWS_SECRET", "LD_PRELOAD"] },
    },
  );
  assert.deepEqual(refusal(serve(), { "env-json": { TOKEN: "x" } }), {
    code: "http.forbidden",
    message:
      "env-json: TOKEN may not be set per request. The operator can allow names with --allow-env-names (none allowed now).",
    detail: { key: "env-json", names: ["TOKEN"] },
  });
  const operator = serve({ "env-json": { OPERATOR_ONLY: "kept", LANG: "C" } }, {
    allowEnvNames: ["LANG", "HTTP_PROXY"],
  });
  const config = resolveCallerConfig(operator, {
    "env-json": { LANG: "de_DE.UTF-8", HTTP_PROXY: "http://proxy:3128" },
  });
  assert.deepEqual(config.envJson, {
    OPERATOR_ONLY: "kept",
    LANG: "de_DE.UTF-8",
    HTTP_PROXY: "http://proxy:3128",
  });
});
