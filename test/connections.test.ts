/**
 * The drain's connection tracker, driven with stand-ins for node's server and sockets: which
 * connections it counts, closes and destroys as they come and go, slots reused included. The
 * drain itself, over real sockets and signals, is in lifecycle-signals and lifecycle-close.
 */
import { EventEmitter } from "node:events";
import type { Server } from "node:http";
import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { Connections } from "../src/lifecycle/connections.js";

/** Where node:http keeps the response in flight on a socket, as the tracker reads it. */
const HTTP_MESSAGE = "_httpMessage";

/** A socket as the tracker sees it: its close event, bytes read, node's response in flight, destroy(). */
class FakeSocket extends EventEmitter {
  bytesRead = 0;
  destroyed = false;
  [HTTP_MESSAGE]: { headersSent: boolean } | null | undefined = undefined;
  /** A socket whose close event comes within destroy() itself, as a stand-in's could. */
  closesAtOnce = false;
  destroy(): this {
    this.destroyed = true;
    if (this.closesAtOnce) this.close();
    return this;
  }
  /** node's close event, which comes after destroy() (or the peer's end) on a later turn. */
  close(): void {
    this.emit("close", false);
  }
}

function tracker(): { connections: Connections; connect: () => FakeSocket } {
  const server = new EventEmitter();
  const connections = new Connections(server as unknown as Server);
  const connect = (): FakeSocket => {
    const socket = new FakeSocket();
    server.emit("connection", socket as unknown as Socket);
    return socket;
  };
  return { connections, connect };
}

describe("Connections", () => {
  it("counts the requests in flight on the open connections only, closed ones forgotten", () => {
    const { connections, connect } = tracker();
    const [running, writing, idle, gone] = [connect(), connect(), connect(), connect()];
    running[HTTP_MESSAGE] = { headersSent: false };
    writing[HTTP_MESSAGE] = { headersSent: true };
    idle[HTTP_MESSAGE] = null;
    gone[HTTP_MESSAGE] = { headersSent: false };
    gone.close();

    expect(connections.accepted).toBe(4);
    expect(connections.inFlight()).toEqual({ running: 1, writing: 1 });
  });

  it("closes only the connections with no request in flight that read nothing since the last look", () => {
    const { connections, connect } = tracker();
    const [busy, fresh, reading, quiet] = [connect(), connect(), connect(), connect()];
    busy[HTTP_MESSAGE] = { headersSent: false };
    reading.bytesRead = 10;
    connections.mark();
    reading.bytesRead = 25;

    expect(connections.closeIdle()).toBe(2);
    expect([busy.destroyed, fresh.destroyed, reading.destroyed, quiet.destroyed]).toEqual([false, true, false, true]);
    // The one still receiving gets until the next look, and then goes if it read nothing more.
    expect(connections.closeIdle()).toBe(1);
    expect(reading.destroyed).toBe(true);
  });

  it("keeps tracking the connection that took a slot let go by closeIdle() when the old socket's close comes late", () => {
    const { connections, connect } = tracker();
    const old = connect();
    connections.mark();
    expect(connections.closeIdle()).toBe(1);
    const next = connect();
    next[HTTP_MESSAGE] = { headersSent: false };
    old.close();

    expect(connections.inFlight()).toEqual({ running: 1, writing: 0 });
    const third = connect();
    third[HTTP_MESSAGE] = { headersSent: true };
    expect(connections.inFlight()).toEqual({ running: 1, writing: 1 });
    expect(connections.destroyAll()).toEqual({ running: 1, writing: 1 });
    expect([next.destroyed, third.destroyed]).toEqual([true, true]);
  });

  it("frees a slot once when a socket closed by closeIdle() reports its close within destroy()", () => {
    const { connections, connect } = tracker();
    const idle = connect();
    idle.closesAtOnce = true;
    connections.mark();
    expect(connections.closeIdle()).toBe(1);
    // Two new connections must get two slots: a slot freed twice would put both in one.
    const [first, second] = [connect(), connect()];
    first[HTTP_MESSAGE] = { headersSent: false };
    second[HTTP_MESSAGE] = { headersSent: true };
    expect(connections.inFlight()).toEqual({ running: 1, writing: 1 });
  });

  it("reuses the slots of closed connections and destroys every open one at the end, whatever the order of closes", () => {
    const { connections, connect } = tracker();
    const open = new Set<FakeSocket>();
    const all: FakeSocket[] = [];
    for (let round = 0; round < 200; round++) {
      const socket = connect();
      all.push(socket);
      open.add(socket);
      // Close an older one every other round, from the middle, so slots free up out of order.
      if (round % 2 === 1) {
        const victim = [...open][Math.floor(open.size / 2)] as FakeSocket;
        open.delete(victim);
        victim.close();
      }
    }
    for (const socket of open) socket[HTTP_MESSAGE] = { headersSent: false };

    expect(connections.inFlight()).toEqual({ running: open.size, writing: 0 });
    connections.destroyAll();
    expect(all.filter((socket) => socket.destroyed)).toEqual([...open]);
    // Closes that come after destroyAll() leave a tracker with nothing in it.
    for (const socket of open) socket.close();
    expect(connections.inFlight()).toEqual({ running: 0, writing: 0 });
  });
});
