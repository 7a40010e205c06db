import type { H3Event } from "h3";
import type { RawQuery } from "../route.js";

/** Query string → object; a repeated key becomes an array. Fresh object per call: callers may mutate it. */
export function readQuery(event: H3Event): RawQuery {
  const out: RawQuery = {};
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
