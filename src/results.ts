import { HTTPResponse } from "h3";

const JSON_HEADERS = { "content-type": "application/json;charset=UTF-8" } as const;

/** A JSON response with any status and extra headers. */
export function json(value: unknown, status = 200, headers?: Record<string, string>): HTTPResponse {
  return new HTTPResponse(JSON.stringify(value), { status, headers: headers ? { ...JSON_HEADERS, ...headers } : JSON_HEADERS });
}

/** 201 Created with the created value as JSON, and a Location header when given. */
export function created(value: unknown, location?: string): HTTPResponse {
  return json(value, 201, location === undefined ? undefined : { location });
}

/** 204 No Content. A handler that returns `undefined` gets the same. */
export function noContent(): HTTPResponse {
  return new HTTPResponse(null, { status: 204 });
}
