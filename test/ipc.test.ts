import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { Channel, defineIpcMessage, defineIpcRequest, type Endpoint, type Envelope } from "../src/cluster/ipc.js";

function endpoint(self: EventEmitter, peer: EventEmitter): Endpoint {
  return {
    send: (message: Envelope) => setImmediate(() => peer.emit("message", structuredClone(message))),
    on: (event, listener) => self.on(event, listener),
    off: (event, listener) => self.off(event, listener),
  };
}

/** Two endpoints wired to each other, delivering asynchronously like a real IPC pipe. */
function pipePair(): [Endpoint, Endpoint] {
  const a = new EventEmitter();
  const b = new EventEmitter();
  return [endpoint(a, b), endpoint(b, a)];
}

const ping = defineIpcRequest<{ n: number }, { doubled: number }>("test-ipc:ping");
const note = defineIpcMessage<{ text: string }>("test-ipc:note");

describe("IPC: integrations register their own message types", () => {
  it("a registered request is served on the other side and answered with one envelope type", async () => {
    const [worker, primary] = pipePair();
    const seen: unknown[] = [];
    primary.on("message", (message) => seen.push(message));
    const workerSide = new Channel<Record<string, never>, Record<string, never>>(worker);
    const primarySide = new Channel<Record<string, never>, Record<string, never>>(primary);
    workerSide.handle(ping, ({ n }) => ({ doubled: n * 2 }));
    expect(await primarySide.request(ping, { n: 21 }, 1000)).toEqual({ doubled: 42 });
    expect(seen).toEqual([{ keelson: 1, type: "test-ipc:ping", replyTo: 1, payload: { doubled: 42 } }]);
  });

  it("a registered one-way message reaches its listeners; the undo stops it", async () => {
    const [worker, primary] = pipePair();
    const workerSide = new Channel<Record<string, never>, Record<string, never>>(worker);
    const primarySide = new Channel<Record<string, never>, Record<string, never>>(primary);
    const got: string[] = [];
    const off = primarySide.on(note, ({ text }) => got.push(text));
    const delivered = new Promise<void>((resolve) => primarySide.on(note, () => resolve()));
    workerSide.send(note, { text: "hello" });
    await delivered;
    off();
    workerSide.send(note, { text: "again" });
    await new Promise<void>((resolve) => primarySide.on(note, () => resolve()));
    expect(got).toEqual(["hello"]);
  });

  it("an unserved type, a silent peer and a closed channel reject instead of hanging", async () => {
    const [worker, primary] = pipePair();
    const workerSide = new Channel(worker);
    const primarySide = new Channel<Record<string, never>, Record<string, never>>(primary);
    await expect(primarySide.request(ping, { n: 1 }, 1000)).rejects.toThrow("no handler for test-ipc:ping");
    workerSide.close();
    const [, lonely] = pipePair();
    await expect(new Channel(lonely).request(ping, { n: 1 }, 20)).rejects.toThrow("IPC request test-ipc:ping timed out after 20ms");
    const closing = new Channel(lonely);
    const pending = closing.request(ping, { n: 1 }, 5000);
    closing.close();
    await expect(pending).rejects.toThrow("IPC channel closed");
  });

  it("answers each of many requests waiting at once with its own reply, whatever the order of the replies", async () => {
    const [worker, primary] = pipePair();
    const workerSide = new Channel(worker);
    const primarySide = new Channel<Record<string, never>, Record<string, never>>(primary);
    // Replies in reverse order of arrival, in batches, so that slots free up out of order and get reused.
    let held: Array<() => void> = [];
    workerSide.handle(ping, ({ n }) => new Promise((resolve) => {
      held.push(() => resolve({ doubled: n * 2 }));
      if (held.length === 25) {
        const batch = held.toReversed();
        held = [];
        for (const release of batch) release();
      }
    }));
    for (let round = 0; round < 4; round++) {
      const ns = Array.from({ length: 100 }, (_, i) => round * 100 + i);
      expect(await Promise.all(ns.map((n) => primarySide.request(ping, { n }, 5000)))).toEqual(ns.map((n) => ({ doubled: n * 2 })));
    }
  });

  it("drops a reply that comes after its request timed out, even when a newer request waits in its place", async () => {
    const [worker, primary] = pipePair();
    // No channel on the worker's side: the test answers by hand, late.
    const asked: number[] = [];
    worker.on("message", (message) => asked.push((message as Envelope).id as number));
    const primarySide = new Channel<Record<string, never>, Record<string, never>>(primary);
    await expect(primarySide.request(ping, { n: 1 }, 10)).rejects.toThrow("timed out after 10ms");
    const newer = primarySide.request(ping, { n: 2 }, 2000);
    while (asked.length < 2) await new Promise((resolve) => setImmediate(resolve));
    const [timedOut, waiting] = asked as [number, number];
    expect(waiting).not.toBe(timedOut);
    worker.send({ keelson: 1, type: "test-ipc:ping", replyTo: timedOut, payload: { doubled: 2 } });
    worker.send({ keelson: 1, type: "test-ipc:ping", replyTo: waiting, payload: { doubled: 4 } });
    expect(await newer).toEqual({ doubled: 4 });
  });

  it("names are <integration>:<name> and one name is one kind", () => {
    expect(() => defineIpcMessage("ready")).toThrow('IPC type "ready" must be "<integration>:<name>"');
    expect(() => defineIpcRequest("test-ipc:note")).toThrow('IPC type "test-ipc:note" is already registered as a message');
    expect(defineIpcRequest<{ n: number }, { doubled: number }>("test-ipc:ping")).toEqual(ping);
  });
});
