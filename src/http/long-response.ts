import type { H3Event } from "h3";
import { FastResponse } from "srvx";
import type { LongConnection, OpenStreams } from "./open-streams.js";

/** The reconnection delay named in the final event of an event stream keelson did not make (ms). */
export const DRAIN_RETRY_MS = 1000;

const FINAL_EVENT = new TextEncoder().encode(`event: shutdown\nretry: ${DRAIN_RETRY_MS}\ndata: {"reconnect":true}\n\n`);

/**
 * Notes on the request's state that a handler answered with a streamed body (a ReadableStream, or
 * a response or h3 `HTTPResponse` around one, h3's `createEventStream` included): only such a
 * response is looked at again once h3 has made it (`drainableEventStream`), so a JSON answer pays
 * for two type checks and nothing more.
 */
export function noteStreamedBody(value: unknown, event: H3Event): void {
  if (typeof value !== "object" || value === null) return;
  if (value instanceof ReadableStream || (value as { body?: unknown }).body instanceof ReadableStream) {
    const state = event.context.keelson;
    if (state !== undefined) state.streamedBody = true;
  }
}

/** True when `chunk` ends an event (a blank line): a final event may follow it without splitting one. */
function endsEvent(chunk: unknown): boolean {
  if (typeof chunk === "string") return chunk.endsWith("\n\n") || chunk.endsWith("\r\r") || chunk.endsWith("\r\n\r\n");
  if (!(chunk instanceof Uint8Array) || chunk.byteLength < 2) return false;
  const last = chunk[chunk.byteLength - 1];
  const before = chunk[chunk.byteLength - 2];
  return (last === 10 && (before === 10 || (before === 13 && chunk.byteLength >= 4 && chunk[chunk.byteLength - 3] === 10))) || (last === 13 && before === 13);
}

/**
 * A `text/event-stream` response keelson did not make (h3's `createEventStream`, a handler's own
 * stream) made drainable: its body is read through a stream keelson can end, registered with the
 * App's open streams. At the drain the client gets a final `shutdown` event with a `retry:` hint
 * (when the last chunk ended an event, as each of h3's writes does), then the end of the body; the
 * source is cancelled, so h3's `onClosed` callbacks run. `ended` settles with the status to log.
 * Undefined for any other response.
 */
export function drainableEventStream(response: Response, route: string, streams: OpenStreams): { response: Response; ended: Promise<number> } | undefined {
  const type = response.headers.get("content-type");
  const source = response.body;
  if (type === null || !type.toLowerCase().startsWith("text/event-stream") || source === null) return undefined;
  const reader = source.getReader();
  let controller!: ReadableStreamDefaultController<unknown>;
  let atBoundary = true;
  let open = true;
  let settle!: () => void;
  const ended = new Promise<number>((resolve) => (settle = () => resolve(response.status)));
  const finish = () => {
    if (!open) return false;
    open = false;
    streams.delete(connection);
    settle();
    return true;
  };
  const body = new ReadableStream<unknown>({
    start: (given) => {
      controller = given;
    },
    pull: async () => {
      let chunk: ReadableStreamReadResult<unknown>;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (finish()) controller.error(error);
        return;
      }
      if (!open) return;
      if (chunk.done) {
        finish();
        controller.close();
        return;
      }
      atBoundary = endsEvent(chunk.value);
      controller.enqueue(chunk.value);
    },
    cancel: (reason) => {
      finish();
      return reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
  const connection: LongConnection = {
    kind: "sse",
    route,
    end: async () => {
      if (!finish()) return;
      try {
        if (atBoundary) controller.enqueue(FINAL_EVENT);
        controller.close();
      } catch {
        // The client went away meanwhile: nothing is left to end.
      }
      await reader.cancel("the server is shutting down").catch(() => {});
    },
  };
  streams.add(connection);
  return { response: new FastResponse(body as ReadableStream<Uint8Array>, { status: response.status, statusText: response.statusText, headers: response.headers }), ended };
}
