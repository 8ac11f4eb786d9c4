/**
 * fast-check generators for the streaming tests: texts of emoji, combining
 * marks, surrogate pairs and configured secrets (whole, or a prefix that a
 * later chunk may or may not complete), cut into chunks at any code unit,
 * and agent scripts interleaving such text with tool calls and terminal
 * events.
 *
 * @module
 */

import fc from "fast-check";

/** Pieces texts are made of: a small alphabet, so secrets overlap often. */
const ATOMS = [
  "a",
  "b",
  "k",
  "-",
  " ",
  "\n",
  "é", // precomposed
  "e\u0301", // e + combining acute
  "\u0301", // a combining mark alone
  "😀", // one surrogate pair
  "👍🏽", // two pairs (emoji + skin tone)
  "中",
];

/** A configured secret: at least 4 code units, sometimes with a pair inside. */
export const secret: fc.Arbitrary<string> = fc
  .array(fc.constantFrom("a", "b", "k", "-", "😀", "é"), {
    minLength: 2,
    maxLength: 6,
  })
  .map((parts) => parts.join(""))
  .filter((value) => value.length >= 4);

/** Some secrets and a well-formed text. */
export interface TextCase {
  secrets: string[];
  text: string;
}

/** A text from atoms and `secrets`, whole or cut short (at a code point). */
function textOf(secrets: string[], maxParts = 16): fc.Arbitrary<string> {
  const part = secrets.length
    ? fc.oneof(
      fc.constantFrom(...ATOMS),
      fc.constantFrom(...secrets),
      fc.tuple(fc.constantFrom(...secrets), fc.nat()).map(([value, n]) => {
        const points = [...value];
        return points.slice(0, n % points.length).join("");
      }),
    )
    : fc.constantFrom(...ATOMS);
  return fc.array(part, { maxLength: maxParts }).map((parts) => parts.join(""));
}

/** Zero to three secrets and a text that holds them anywhere. */
export function secretsAndText(): fc.Arbitrary<TextCase> {
  return fc.uniqueArray(secret, { maxLength: 3 }).chain((secrets) =>
    textOf(secrets).map((text) => ({ secrets, text }))
  );
}

/** Cuts `text` into non-empty chunks at `cuts` (code units: a cut may split a pair). */
export function cutText(text: string, cuts: number[]): string[] {
  const at = [...new Set(cuts.map((cut) => cut % (text.length + 1)))]
    .sort((a, b) => a - b);
  const chunks: string[] = [];
  let from = 0;
  for (const cut of [...at, text.length]) {
    if (cut > from) chunks.push(text.slice(from, cut));
    from = cut;
  }
  return chunks;
}

/** A {@linkcode TextCase} cut into chunks. */
export function chunked(): fc.Arbitrary<TextCase & { chunks: string[] }> {
  return fc.tuple(secretsAndText(), fc.array(fc.nat(), { maxLength: 12 }))
    .map(([c, cuts]) => ({ ...c, chunks: cutText(c.text, cuts) }));
}

/** One step an agent's turn hands the coalescer. */
export type ScriptStep =
  | { kind: "text"; stream: "message" | "thought"; text: string }
  | { kind: "event"; type: string }
  | { kind: "flush" };

const OTHER_EVENTS = [
  "tool.call.started",
  "tool.call.completed",
  "plan.updated",
];

/**
 * Secrets and a turn: stretches of message or thought text (each cut into
 * chunks anywhere), other events and flushes between them, one terminal
 * event, and sometimes text after it (which must go nowhere).
 */
export function agentScript(): fc.Arbitrary<
  { secrets: string[]; steps: ScriptStep[] }
> {
  return fc.uniqueArray(secret, { maxLength: 3 }).chain((secrets) => {
    const stretch = fc.tuple(
      fc.constantFrom<"message" | "thought">("message", "message", "thought"),
      textOf(secrets, 10),
      fc.array(fc.nat(), { maxLength: 6 }),
    ).map(([stream, text, cuts]): ScriptStep[] =>
      cutText(text, cuts).map((chunk) => ({
        kind: "text",
        stream,
        text: chunk,
      }))
    );
    const between = fc.oneof(
      fc.constantFrom(...OTHER_EVENTS).map((type): ScriptStep[] => [
        { kind: "event", type },
      ]),
      fc.constant<ScriptStep[]>([{ kind: "flush" }]),
      fc.constant<ScriptStep[]>([]),
    );
    return fc.tuple(
      fc.array(fc.tuple(stretch, between), { maxLength: 6 }),
      fc.constantFrom("run.completed", "run.failed"),
      stretch,
    ).map(([body, terminal, after]) => ({
      secrets,
      steps: [
        ...body.flatMap(([text, other]) => [...text, ...other]),
        { kind: "event", type: terminal } as ScriptStep,
        ...after,
      ],
    }));
  });
}
