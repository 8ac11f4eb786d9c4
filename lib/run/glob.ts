/**
 * The globs of `permission-rules-json`: `**` crosses `/`, `*` and `?` do
 * not, everything else is literal.
 *
 * @module
 */

/** A glob as a regular expression: `**` crosses `/`, `*` and `?` do not. */
export function globPattern(glob: string): RegExp {
  let source = "";
  for (let i = 0; i < glob.length; i++) {
    const char = glob[i];
    if (char === "*" && glob[i + 1] === "*") {
      i++;
      if (glob[i + 1] === "/") {
        i++;
        source += "(?:.*/)?";
      } else source += ".*";
    } else if (char === "*") source += "[^/]*";
    else if (char === "?") source += "[^/]";
    else source += char.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`, "s");
}
