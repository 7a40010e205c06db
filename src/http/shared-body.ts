import { HTTPResponse } from "h3";

/**
 * A response whose body is `bytes` itself, for a body kept in memory and sent many times (the
 * docs bundle, the OpenAPI document): every response shares the one copy.
 *
 * A web `Response` would not do: the fetch spec copies a BufferSource body when the Response is
 * built, so each unread response pinned its own copy of the bundle, and memory grew with every slow reader.
 * An h3 `HTTPResponse` reaches srvx as a `FastResponse` around the same bytes, and srvx hands them to
 * the socket in one write: node keeps a reference (no copy) until the kernel, at the pace the client
 * reads, has taken them all.
 */
export function sharedBody(bytes: Uint8Array<ArrayBuffer>, headers: Readonly<Record<string, string>>): HTTPResponse {
  // Set here, not left to srvx: a HEAD answer (no body) still says how long the GET would be.
  return new HTTPResponse(bytes, { headers: { ...headers, "content-length": String(bytes.byteLength) } });
}
