import { assertBodySize, type H3Event } from "h3";
import { createError } from "../errors.js";

const JSON_TYPE = /^application\/(?:[\w.+-]*\+)?json\b/i;

/**
 * Reads and parses a JSON request body under `limit` bytes. Empty body → undefined.
 * 413 over the limit (by Content-Length up front, or while streaming a chunked body),
 * 415 for a body that says it is not JSON, 400 for malformed JSON. A body without a
 * Content-Type is parsed as JSON: clients such as curl forget it more often than not.
 */
export async function readJSONBody(event: H3Event, limit: number): Promise<unknown> {
  const headers = event.req.headers;
  const length = headers.get("content-length");
  if (length === "0" || (length === null && event.req.body === null)) return undefined;
  if (length !== null && Number(length) > limit) {
    throw createError("PAYLOAD_TOO_LARGE", `Request body exceeds the limit of ${limit} bytes`);
  }
  const type = headers.get("content-type");
  if (type !== null && !JSON_TYPE.test(type)) {
    throw createError("UNSUPPORTED_MEDIA_TYPE", "Request body must be application/json");
  }
  assertBodySize(event, limit);
  const text = await event.req.text();
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw createError("INVALID_JSON");
  }
}
