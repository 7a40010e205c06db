import type { H3Event } from "h3";

/**
 * Sets a response header for whatever response this request ends with (errors included).
 * On Node it goes straight onto the ServerResponse, which merges it at writeHead: cheaper than
 * h3's prepared headers, which copy the response's Headers object on every request.
 */
export function setResponseHeader(event: H3Event, name: string, value: string): void {
  const res = event.runtime?.node?.res;
  if (res && !res.headersSent) res.setHeader(name, value);
  else event.res.headers.set(name, value);
}

/**
 * A request header, or null. On Node it is read from node's parsed header object: Headers#get
 * lower-cases and checks the name first, and for an absent header also runs a regex. Only for
 * lower-case names that node, like Headers, joins with ", " when repeated: not content-type,
 * user-agent, authorization, host and the other single-value headers, of which node keeps the first.
 */
export function readRequestHeader(event: H3Event, name: string): string | null {
  const nodeHeaders = event.runtime?.node?.req.headers;
  if (nodeHeaders === undefined) return event.req.headers.get(name);
  const value = nodeHeaders[name];
  return typeof value === "string" ? value : null;
}

/** Takes back headers set earlier for this request's response (by `setResponseHeader` or h3). */
export function removeResponseHeaders(event: H3Event, names: readonly string[]): void {
  const res = event.runtime?.node?.res;
  for (const name of names) {
    if (res && !res.headersSent) res.removeHeader(name);
    event.res.headers.delete(name);
  }
}

/**
 * The headers of every JSON body keelson sends. `nosniff`: a browser must never take a JSON
 * answer (which can echo client input) for HTML or script.
 */
export const JSON_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  "content-type": "application/json;charset=UTF-8",
  "x-content-type-options": "nosniff",
});
