/**
 * The browser files the operator console loads besides its page: the
 * Markdown renderer (marked) and the HTML sanitiser (DOMPurify), each the
 * library's own browser ESM file from its npm package. They are text imports,
 * so they are part of the module graph and `deno compile` embeds them in the
 * binary; serving them needs no build step.
 *
 * @module
 */

import markedSource from "marked" with { type: "text" };
import purifySource from "dompurify" with { type: "text" };

/** A static file the console serves: its body and content type. */
export interface ConsoleAsset {
  /** The file's text. */
  body: string;
  /** Its `content-type`. */
  type: string;
}

const SCRIPT_TYPE = "text/javascript; charset=utf-8";

/** The runner's icon: a terminal prompt on a dark tile. */
const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">` +
  `<rect width="32" height="32" rx="6" fill="#1d232a"/>` +
  `<path d="M8 10l7 6-7 6" fill="none" stroke="#7fd1a0" stroke-width="3" stroke-linecap="round" stroke-linejoin="round"/>` +
  `<path d="M17 23h8" stroke="#fff" stroke-width="3" stroke-linecap="round"/></svg>`;

/** Strips the source-map comment: the maps are not served. */
function withoutSourceMap(source: string): string {
  return source.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n");
}

/**
 * The page's import map: the console's modules import the two libraries by
 * their package names (which `deno check` resolves to the npm packages and
 * their types); the browser finds them at the paths served here.
 */
export const CONSOLE_IMPORT_MAP: string = JSON.stringify({
  imports: { marked: "/console/marked.js", dompurify: "/console/purify.js" },
});

/** The console's static files by path. */
export const CONSOLE_ASSETS: Readonly<Record<string, ConsoleAsset>> = {
  "/console/marked.js": {
    body: withoutSourceMap(markedSource),
    type: SCRIPT_TYPE,
  },
  "/console/purify.js": {
    body: withoutSourceMap(purifySource),
    type: SCRIPT_TYPE,
  },
  "/favicon.ico": { body: FAVICON, type: "image/svg+xml" },
};
