import { ServerResponse, STATUS_CODES, type IncomingMessage } from "node:http";

/**
 * node:http's response with the standard reason phrase (`HTTP/1.1 404 Not Found`) when none is
 * given. srvx hands a web Response's `statusText` to `writeHead` as is, and a Response built without
 * one (nearly all of them, h3's too) has `""`, which node writes verbatim: `HTTP/1.1 200 `. A reason
 * phrase set on purpose is kept.
 */
export class StandardReasonResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {}

const writeHead = ServerResponse.prototype.writeHead;

// Assigned rather than declared with `override`: writeHead's overloads cannot be restated in a subclass.
// node's writeHead reads its arguments by position, never by count, so an undefined `headers` passed
// on is the same as one left out: a plain call, no argument array per response.
StandardReasonResponse.prototype.writeHead = function (this: ServerResponse, statusCode: number, reason?: unknown, headers?: unknown) {
  return (writeHead as (this: ServerResponse, ...args: unknown[]) => ServerResponse).call(
    this, statusCode, reason === "" ? (STATUS_CODES[statusCode] ?? "") : reason, headers,
  );
} as ServerResponse["writeHead"];
