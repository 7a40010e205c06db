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
StandardReasonResponse.prototype.writeHead = function (this: ServerResponse, statusCode: number, reason?: unknown, headers?: unknown) {
  const phrase = reason === "" ? (STATUS_CODES[statusCode] ?? "") : reason;
  return Reflect.apply(writeHead, this, headers === undefined ? [statusCode, phrase] : [statusCode, phrase, headers]) as ServerResponse;
} as ServerResponse["writeHead"];
