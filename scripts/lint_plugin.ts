/**
 * Project lint rules, run by `deno lint`: no function of the runner itself
 * (`lib/`, `main.ts`, `daemon.ts`) or of `scripts/` longer than
 * {@linkcode MAX_FUNCTION_LINES} lines unless a `// long-function:` comment
 * right above it says why.
 *
 * @module
 */

/** The longest function body allowed without a reason. */
export const MAX_FUNCTION_LINES = 80;

/** The repository's root, as a path ending in `/`. */
const ROOT = decodeURIComponent(new URL("..", import.meta.url).pathname);

/**
 * Whether the length rule covers `filename`: the runner's code (`lib/`,
 * `main.ts`, `daemon.ts`) and `scripts/`; tests and fixtures are not.
 */
export function coveredByLengthRule(filename: string): boolean {
  const path = filename.replaceAll("\\", "/");
  const rel = path.startsWith(ROOT) ? path.slice(ROOT.length) : path;
  return /^(lib|scripts)\//.test(rel) || /^(main|daemon)\.ts$/.test(rel);
}

const plugin: Deno.lint.Plugin = {
  name: "runner",
  rules: {
    "max-function-lines": {
      create(context) {
        if (!coveredByLengthRule(context.filename)) return {};
        const text = context.sourceCode.text;
        const lineOf = (offset: number) =>
          text.slice(0, offset).split("\n").length;
        function check(node: Deno.lint.Node & { range: Deno.lint.Range }) {
          const [start, end] = node.range;
          const lines = lineOf(end) - lineOf(start) + 1;
          if (lines <= MAX_FUNCTION_LINES) return;
          const lineStart = text.lastIndexOf("\n", start - 1);
          const before = text.slice(Math.max(0, lineStart - 2000), lineStart);
          const previousLines = before.split("\n").slice(-6).join("\n");
          if (previousLines.includes("// long-function:")) return;
          context.report({
            node,
            message:
              `function is ${lines} lines long (limit ${MAX_FUNCTION_LINES})`,
            hint:
              "split it into named steps, or say why above it in a `// long-function:` comment",
          });
        }
        return {
          FunctionDeclaration: check,
          FunctionExpression: check,
          ArrowFunctionExpression: check,
        };
      },
    },
  },
};

export default plugin;
