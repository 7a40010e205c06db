/**
 * Keeps a request's query string out of the error line logged for a 5xx: query strings carry
 * tokens, signatures and e-mail addresses, and application code often quotes the value it choked
 * on in the error it throws. Runs only when a 5xx is logged, never on the per-request path.
 */

/** What stands in for a removed query string or value. */
export const QUERY_PLACEHOLDER = "[query]";

// Values this long are removed wherever they occur. Shorter ones (`page=1`, `sort=id`) would
// garble every `1` and `id` of the text, and are removed only where they stand alone in the
// message, never inside a longer word or number, and never from the stack frames.
const MIN_ANYWHERE = 4;
// Where V8's stack frames begin: the text before it is the error's name and message.
const FRAMES = "\n    at ";

function decode(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}

/** Every value of `search` as sent, form-decoded (`+` is a space) and percent-decoded. */
function queryValues(search: string): string[] {
  const values = new Set<string>();
  for (const pair of search.slice(1).split("&")) {
    const eq = pair.indexOf("=");
    if (eq === -1) continue;
    const raw = pair.slice(eq + 1);
    values.add(raw);
    const decoded = decode(raw);
    if (decoded !== undefined) values.add(decoded);
  }
  for (const value of new URLSearchParams(search).values()) values.add(value);
  values.delete("");
  // Longest first: a value that contains a shorter one must be removed whole.
  return [...values].toSorted((a, b) => b.length - a.length);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * `text` without the query string `search` (`?a=1&b=2`, as in the URL) and without any of its
 * values, as sent or decoded, each replaced by `[query]`. Values shorter than four characters are
 * replaced only where they stand alone in the message part (see MIN_ANYWHERE).
 *
 * @example
 * redactQuery('Error: no user "bob@example.com"\n    at find (db.ts:9:3)', "?email=bob%40example.com")
 * // 'Error: no user "[query]"\n    at find (db.ts:9:3)'
 */
export function redactQuery(text: string, search: string): string {
  if (search.length <= 1) return text;
  const anywhere = [search];
  const short: string[] = [];
  for (const value of queryValues(search)) (value.length >= MIN_ANYWHERE ? anywhere : short).push(value);
  // One pass, longest alternative first: a placeholder is never matched again.
  const pattern = new RegExp(anywhere.map(escapeRegExp).join("|"), "g");
  const out = text.replace(pattern, (match) => (match === search ? "?" + QUERY_PLACEHOLDER : QUERY_PLACEHOLDER));
  if (short.length === 0) return out;
  const alone = new RegExp(`(?<![\\p{L}\\p{N}])(?:${short.map(escapeRegExp).join("|")})(?![\\p{L}\\p{N}])`, "gu");
  const frames = out.indexOf(FRAMES);
  const message = frames === -1 ? out : out.slice(0, frames);
  return message.replace(alone, QUERY_PLACEHOLDER) + (frames === -1 ? "" : out.slice(frames));
}
