/**
 * Shared CLI plumbing: parsing `--flags` with clean usage errors, run-config
 * keys as flags, and printing failures.
 *
 * @module
 */

import { parseArgs, type ParseArgsConfig } from "node:util";
import { RUN_CONFIG_KEYS } from "../config.ts";
import { RunnerError, toRunnerError } from "../errors.ts";
import { closestName } from "../closest_name.ts";

/** `parseArgs` options for every run-config key (all strings). */
export function configFlagOptions(): Record<string, { type: "string" }> {
  return Object.fromEntries(
    Object.keys(RUN_CONFIG_KEYS).map((
      key,
    ) => [key, { type: "string" as const }]),
  );
}

/** Picks the run-config keys out of parsed flag values. */
export function configFromFlags(
  values: Record<string, unknown>,
): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  for (const key of Object.keys(RUN_CONFIG_KEYS)) {
    if (values[key] !== undefined) config[key] = values[key];
  }
  return config;
}

const NEGATIVE_NUMBER = /^-(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;

/**
 * Joins `--flag -5` into `--flag=-5` for string options, so a negative number
 * reaches the value check ("must be greater than 0") instead of being taken
 * for an option.
 */
function joinNegativeValues(
  args: string[],
  options: ParseArgsConfig["options"] = {},
): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      joined.push(...args.slice(i));
      break;
    }
    const name = arg.startsWith("--") ? arg.slice(2) : undefined;
    const next = args[i + 1];
    if (
      name && options[name]?.type === "string" && next !== undefined &&
      NEGATIVE_NUMBER.test(next)
    ) {
      joined.push(`${arg}=${next}`);
      i++;
    } else {
      joined.push(arg);
    }
  }
  return joined;
}

function usageMessage(
  error: unknown,
  options: ParseArgsConfig["options"] = {},
): string {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: string }).code;
  const flag = /'(-[^' ]+)/.exec(message)?.[1];
  if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && flag) {
    const meant = flag.startsWith("--")
      ? closestName(flag.slice(2).split("=")[0], Object.keys(options))
      : undefined;
    return `${flag}: unknown option${
      meant ? ` (did you mean --${meant}?)` : ""
    }`;
  }
  if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
    const argument = /'([^']*)'/.exec(message)?.[1];
    return `unexpected argument${argument ? ` "${argument}"` : ""}`;
  }
  if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && flag) {
    if (message.includes("argument missing")) return `${flag}: needs a value`;
    if (message.includes("ambiguous")) {
      return `${flag}: needs a value (the next argument starts with -; write ${flag}=VALUE for a value that starts with -)`;
    }
    if (message.includes("does not take an argument")) {
      return `${flag}: takes no value`;
    }
  }
  return message.split("\n")[0];
}

/**
 * `parseArgs` for a `runner` subcommand. A flag given as `--flag -5` is read
 * as the value `-5`.
 *
 * @throws {RunnerError} `config.invalid` with a one-line message for an
 * unknown flag, a missing value or an unexpected argument.
 */
export function parseFlags<T extends ParseArgsConfig>(
  config: T,
): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs<T>({
      ...config,
      args: joinNegativeValues(config.args ?? [], config.options),
    });
  } catch (error) {
    throw new RunnerError(
      "config.invalid",
      usageMessage(error, config.options),
    );
  }
}

/**
 * Prints a bad-invocation failure and where to look (`see runner <command>
 * --help`) to stderr; returns exit code 2.
 */
export function reportUsageError(error: unknown, command: string): number {
  const failure = toRunnerError(error);
  console.error(`error [${failure.code}]: ${failure.message}`);
  console.error(`see runner ${command} --help`);
  return 2;
}

/** Prints a failure (code and message) to stderr and returns its exit code. */
export function reportFailure(error: unknown, exitCode = 2): number {
  const failure = toRunnerError(error);
  console.error(`error [${failure.code}]: ${failure.message}`);
  return failure instanceof RunnerError ? exitCode : 1;
}

/** `RUNNER_REGISTRY_URL`: the registry a command uses without `--registry-url` (unset: `registry-url`'s default). */
export function registryUrlFromEnv(): string | undefined {
  return Deno.env.get("RUNNER_REGISTRY_URL") || undefined;
}
