import type { H3Event } from "h3";

/**
 * Raw query: a repeated key becomes an array. A prototype-free object: `constructor`, `toString`
 * and `__proto__` are keys like any other, and a key that was not sent is `undefined`.
 */
export type RawQuery = Record<string, string | string[]>;

/**
 * Query string → object; a repeated key becomes an array. Fresh object per call: callers may
 * mutate it. The object has no prototype, so every key is data: `?constructor=1` is "1" (not
 * Object's constructor with "1" appended) and `?__proto__=a&__proto__=b` is an ordinary key.
 */
export function readQuery(event: H3Event): RawQuery {
  const out: RawQuery = Object.create(null) as RawQuery;
  const search = event.url.search;
  if (search.length <= 1) return out;
  for (const [key, value] of new URLSearchParams(search)) {
    const prev = out[key];
    if (prev === undefined) out[key] = value;
    else if (Array.isArray(prev)) prev.push(value);
    else out[key] = [prev, value];
  }
  return out;
}
