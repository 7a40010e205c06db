import { HTTPResponse } from "h3";
import { JSON_HEADERS } from "./headers.js";

function refuse(operation: string, name: string): never {
  throw new TypeError(`the headers of a json()/created() response are shared and frozen (${operation} ${name}); pass extra headers to json()`);
}

/** Headers that refuse changes: one instance is shared by every plain JSON response. */
class FrozenHeaders extends Headers {
  override set(name: string): never {
    return refuse("set", name);
  }
  override append(name: string): never {
    return refuse("append", name);
  }
  override delete(name: string): never {
    return refuse("delete", name);
  }
}

const SHARED_JSON_HEADERS: Headers = new FrozenHeaders(JSON_HEADERS);

/**
 * A response built by json()/created(): it keeps the value it was built from, so a route with a
 * response schema for its status can write that value again through the schema (handler.ts).
 */
export class JSONValueResponse extends HTTPResponse {
  readonly value: unknown;
  constructor(value: unknown, body: string, init: { status: number; headers?: Record<string, string> }) {
    super(body, init);
    this.value = value;
  }
}

/**
 * h3 builds a new Headers from an HTTPResponse's init on every response (about 1 µs); a JSON
 * response without extra headers shares one frozen instance instead, as h3 does for the values
 * it serializes itself.
 */
class SharedHeadersJSONResponse extends JSONValueResponse {
  override get headers(): Headers {
    return SHARED_JSON_HEADERS;
  }
}

/** A JSON response whose body is already serialized (`value` is what it was written from). */
export function jsonText(value: unknown, body: string, status = 200, headers?: Record<string, string>): JSONValueResponse {
  return headers === undefined
    ? new SharedHeadersJSONResponse(value, body, { status })
    : new JSONValueResponse(value, body, { status, headers: { ...JSON_HEADERS, ...headers } });
}

/** A JSON response with any status and extra headers (always with `X-Content-Type-Options: nosniff`). */
export function json(value: unknown, status = 200, headers?: Record<string, string>): HTTPResponse {
  return jsonText(value, JSON.stringify(value), status, headers);
}

/** 201 Created with the created value as JSON, and a Location header when given. */
export function created(value: unknown, location?: string): HTTPResponse {
  return json(value, 201, location === undefined ? undefined : { location });
}

/** 204 No Content. A handler that returns `undefined` gets the same. */
export function noContent(): HTTPResponse {
  return new HTTPResponse(null, { status: 204 });
}
