import type { IncomingMessage, Server as NodeServer, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { Slots } from "../slots.js";

/** Set on a socket upgraded to a WebSocket: its end is the close handshake's, not the idle sweep's. */
const UPGRADED = Symbol("keelson.upgraded");

/**
 * node:http attaches a response to its socket once the request's headers are complete
 * (`assignSocket` sets `socket._httpMessage`) and detaches it once the response has been handed to
 * the kernel in full (`detachSocket` sets it to null), the next pipelined one following. Between
 * the two a request is in flight. Read from node's own field rather than marked by keelson: a mark
 * of its own was a property added to every socket and two overridden calls on every request, for
 * what node keeps anyway (Node's own `closeIdleConnections` reads the same field).
 * Undefined before a socket's first request.
 */
const HTTP_MESSAGE = "_httpMessage";

type TrackedSocket = Socket & { [HTTP_MESSAGE]?: ServerResponse | null; [UPGRADED]?: true };

/** What was still open on the connections a drain gave up on. */
export interface Abandoned {
  /** Responses whose head is out and whose body the client has not taken yet (slow readers). */
  writing: number;
  /** Requests whose handler had not answered yet. */
  running: number;
}

/**
 * Every open connection of a server, from its `connection` event, so that a drain can close the
 * ones with no request in flight: never used, idle between requests, or still sending a request
 * whose headers are not complete. node's own `closeIdleConnections()` counts a connection that never
 * sent a request, or is still sending one, as busy: one such socket held the drain until the deadline.
 */
export class Connections {
  /** Open connections (not a Set: see Slots). */
  readonly #sockets = new Slots<Socket>();
  /** Bytes each connection had read at the last look: one still receiving may be sending a request. */
  readonly #bytesSeen = new WeakMap<Socket, number>();
  /** Connections accepted since the start: a worker's share of the balancer's work. */
  accepted = 0;

  /** Starts tracking; with `upgrades` (the server serves WebSockets), upgraded sockets are left to the WebSocket close handshake. */
  constructor(server: NodeServer, upgrades = false) {
    // Only then: an 'upgrade' listener makes node hand every upgrade request to it instead of serving it as a request.
    if (upgrades) server.on("upgrade", (_request: IncomingMessage, socket: Socket) => ((socket as TrackedSocket)[UPGRADED] = true));
    const sockets = this.#sockets;
    server.on("connection", (socket: Socket) => {
      this.accepted++;
      const slot = sockets.add(socket);
      // The slot is the closure's: a socket carries no property of keelson's (one added to every
      // socket changes its shape on every connection). closeIdle() or destroyAll() may have let
      // the slot go already, and it may hold another socket now: release() checks.
      socket.on("close", () => sockets.release(slot, socket));
    });
  }

  /** Notes what each connection has read so far (at drain start), for `closeIdle()` to compare. */
  mark(): void {
    this.#sockets.forEach((socket) => this.#bytesSeen.set(socket, socket.bytesRead));
  }

  /**
   * Destroys every connection with no request in flight that has received nothing since the last
   * look (a stalled or idle one); returns how many. One that received bytes meanwhile may be in the
   * middle of a keep-alive client's next request: it gets until the next look.
   */
  closeIdle(): number {
    let closed = 0;
    this.#sockets.forEach((socket, slot) => {
      if ((socket as TrackedSocket)[HTTP_MESSAGE] || (socket as TrackedSocket)[UPGRADED]) return;
      const read = socket.bytesRead;
      const seen = this.#bytesSeen.get(socket);
      this.#bytesSeen.set(socket, read);
      if (seen !== undefined && read !== seen) return;
      // Released first: a close event that came at once would find the slot still its own.
      this.#sockets.release(slot, socket);
      socket.destroy();
      closed++;
    });
    return closed;
  }

  /**
   * What the connections' requests are doing now: a response whose head is out (an event stream,
   * a streamed body, a slow reader) is in flight until its last byte is handed to the kernel.
   */
  inFlight(): Abandoned {
    const counts: Abandoned = { writing: 0, running: 0 };
    this.#sockets.forEach((socket) => {
      const response = (socket as TrackedSocket)[HTTP_MESSAGE];
      if (response?.headersSent) counts.writing++;
      else if (response) counts.running++;
    });
    return counts;
  }

  /** Destroys every connection left; returns what their requests were doing. */
  destroyAll(): Abandoned {
    const abandoned = this.inFlight();
    this.#sockets.forEach((socket) => socket.destroy());
    this.#sockets.clear();
    return abandoned;
  }

}
