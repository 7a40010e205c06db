import type { IncomingHttpHeaders } from "node:http";
import type { H3Event } from "h3";
import type { NodeServerResponse } from "srvx";
import { readPendingHeader, removePendingHeader, setCheckedPendingHeader, setPendingHeader } from "./status-line.js";

/**
 * Sets a response header for whatever response this request ends with (errors included).
 * On Node it goes onto the ServerResponse, which merges it at writeHead: cheaper than h3's
 * prepared headers, which copy the response's Headers object on every request. On keelson's own
 * server it goes into the response's header bag rather than through `setHeader` (see
 * StandardReasonResponse); on another server (the App's fetch mounted elsewhere) through `setHeader`.
 * Without a node response (`app.request()`, a WebSocket upgrade, another runtime) it goes into h3's
 * prepared headers, and into its error headers as well: h3 puts only those on a web Response with a
 * 4xx or 5xx status that a handler returns, and on Node the header is on that response too.
 */
export function setResponseHeader(event: H3Event, name: string, value: string): void {
  const res = event.runtime?.node?.res;
  if (res === undefined || !setHeaderBeforeHead(res, name, value)) {
    event.res.headers.set(name, value);
    event.res.errHeaders.set(name, value);
  }
}

/**
 * `setResponseHeader` for a lower-case token name and a value of characters node accepts, both
 * checked once by the caller (the request id): on keelson's own server, straight into the bag.
 */
export function setCheckedResponseHeader(event: H3Event, name: string, value: string): void {
  const res = event.runtime?.node?.res;
  if (res === undefined || res.headersSent || !setCheckedPendingHeader(res, name, value)) setResponseHeader(event, name, value);
}

/**
 * A header set for this request's response by `setResponseHeader` (or h3's prepared headers), not
 * yet written: what a middleware that rewrites the response must keep, as `Vary`. `name` lower-case.
 */
export function readResponseHeader(event: H3Event, name: string): string | undefined {
  const res = event.runtime?.node?.res;
  if (res !== undefined) {
    const pending = readPendingHeader(res, name) ?? res.getHeader(name);
    if (pending !== undefined) return String(pending);
  }
  return event.res.headers.get(name) ?? undefined;
}

/**
 * Sets a header on a node response whose head is not written yet: into keelson's header bag on its
 * own server, else with `setHeader`. False when the head is already out.
 */
export function setHeaderBeforeHead(res: NodeServerResponse, name: string, value: string): boolean {
  if (res.headersSent) return false;
  if (!setPendingHeader(res, name, value)) res.setHeader(name, value);
  return true;
}

/**
 * node's parsed request headers, undefined off Node. For the few reads made on every request
 * (the request id, CORS's Origin): a header read at the caller's own site stays specialised to its
 * one name, where the read inside readRequestHeader, shared by every name, goes megamorphic.
 */
export function nodeRequestHeaders(event: H3Event): IncomingHttpHeaders | undefined {
  return event.runtime?.node?.req.headers;
}

/**
 * A request header, or null. On Node it is read from node's parsed header object: Headers#get
 * lower-cases and checks the name first, and for an absent header also runs a regex. Only for
 * lower-case names that node, like Headers, joins with ", " when repeated: not content-type,
 * user-agent, authorization, host and the other single-value headers, of which node keeps the first.
 */
export function readRequestHeader(event: H3Event, name: string): string | null {
  const nodeHeaders = nodeRequestHeaders(event);
  if (nodeHeaders === undefined) return event.req.headers.get(name);
  const value = nodeHeaders[name];
  return typeof value === "string" ? value : null;
}

/**
 * A request header that node keeps only the first of (user-agent, host, …), or null, with the
 * value Headers#get gives: repeated ones joined with ", ". On Node it is read from node's parsed
 * headers; only a repeated one goes through Headers, whose get() lower-cases the name, scans the
 * raw headers and, for an absent header, runs a regex. `name` must be lower-case.
 */
export function readSingleRequestHeader(event: H3Event, name: string): string | null {
  const req = event.runtime?.node?.req;
  if (req === undefined) return event.req.headers.get(name);
  const value = req.headers[name];
  if (value === undefined) return null;
  return typeof value === "string" && !isRepeated(req.rawHeaders, name) ? value : event.req.headers.get(name);
}

function isRepeated(rawHeaders: readonly string[], name: string): boolean {
  let seen = false;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const key = rawHeaders[i]!;
    if (key.length === name.length && (key === name || key.toLowerCase() === name)) {
      if (seen) return true;
      seen = true;
    }
  }
  return false;
}

/** Takes back headers set earlier for this request's response (by `setResponseHeader` or h3). */
export function removeResponseHeaders(event: H3Event, names: readonly string[]): void {
  const res = event.runtime?.node?.res;
  for (const name of names) {
    if (res && !res.headersSent) {
      removePendingHeader(res, name);
      res.removeHeader(name);
    }
    event.res.headers.delete(name);
    event.res.errHeaders.delete(name);
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
