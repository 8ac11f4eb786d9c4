/**
 * A token `runner serve` makes for itself and keeps in its data dir (mode
 * 0600): made on first start, reused on later ones, refused when other users
 * may read it. The API token (`api_token.ts`) and the daemon hub's token
 * (`daemon_token.ts`) are both kept this way.
 *
 * @module
 */

import { RunnerError } from "../../errors.ts";
import { tokenProblem } from "../../hub/token_rules.ts";
import { randomToken } from "../random_token.ts";

/** Which kept token, for messages. */
export interface KeptToken {
  /** The token file. */
  path: string;
  /** What the token is, e.g. `the API token runner serve keeps`. */
  what: string;
  /** The flag that gives a token instead, e.g. `--api-token`. */
  flag: string;
}

/**
 * The kept token, made (and written with mode 0600, in a data dir made with
 * mode 0700) when there is none yet.
 *
 * @throws {RunnerError} `config.invalid` as {@linkcode readKeptToken}, and
 * when the token cannot be written.
 */
export async function readOrMakeKeptToken(
  kept: KeptToken,
  dataDir: string,
): Promise<string> {
  const found = await readKeptToken(kept);
  if (found !== undefined) return found;
  try {
    await Deno.mkdir(dataDir, { recursive: true, mode: 0o700 });
    const token = randomToken();
    // createNew: of two first starts at once, one writes and the other reads.
    const file = await Deno.open(kept.path, {
      write: true,
      createNew: true,
      mode: 0o600,
    });
    try {
      await file.write(new TextEncoder().encode(`${token}\n`));
    } finally {
      file.close();
    }
    return token;
  } catch (error) {
    if (error instanceof Deno.errors.AlreadyExists) {
      const raced = await readKeptToken(kept);
      if (raced !== undefined) return raced;
    }
    throw new RunnerError(
      "config.invalid",
      `Cannot keep ${kept.what} in ${kept.path} (${
        error instanceof Error ? error.message : error
      }). Make the data dir writable (--data-dir), or pass ${kept.flag}.`,
    );
  }
}

/**
 * The kept token, or undefined when there is no file.
 *
 * @throws {RunnerError} `config.invalid` when other users may read the file,
 * it cannot be read, or it holds no sound token. The token itself never
 * appears in a message.
 */
export async function readKeptToken(
  kept: KeptToken,
): Promise<string | undefined> {
  const { path, what, flag } = kept;
  let text: string;
  try {
    const info = await Deno.stat(path);
    if (info.mode !== null && (info.mode & 0o077) !== 0) {
      throw new RunnerError(
        "config.invalid",
        `${path} (${what}) may be read by other users (mode ${
          (info.mode & 0o777).toString(8)
        }). Run chmod 600 ${path}, or delete it to have a new token made.`,
      );
    }
    text = await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    if (error instanceof RunnerError) throw error;
    throw new RunnerError(
      "config.invalid",
      `Cannot read ${what} in ${path} (${
        error instanceof Error ? error.message : error
      }). Make it readable, or pass ${flag}.`,
    );
  }
  const token = text.replace(/\r?\n$/, "");
  const problem = tokenProblem(token);
  if (problem) {
    throw new RunnerError(
      "config.invalid",
      `${path} (${what}) is refused: ${problem}. Delete it to have a new token made, or pass ${flag}.`,
    );
  }
  return token;
}
