// One IPC vocabulary: the core protocol is declared like the features' types (values made once,
// used on both sides), keeps its wire names, and the supervisor has no public IPC door for 1.0.
import { readdirSync, readFileSync } from "node:fs";
import { EventEmitter } from "node:events";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  Channel, defineIpcMessage, primaryShutdown, workerDraining, workerFailed, workerHeartbeat, workerReady, type Endpoint, type Envelope,
} from "../src/cluster/ipc.js";
import { Supervisor } from "../supervisor/primary.js";

const ROOT = join(import.meta.dirname, "..");

function pair(): [Endpoint, Endpoint, Envelope[]] {
  const a = new EventEmitter();
  const b = new EventEmitter();
  const wire: Envelope[] = [];
  const end = (self: EventEmitter, peer: EventEmitter): Endpoint => ({
    send: (message: Envelope) => {
      wire.push(message);
      setImmediate(() => peer.emit("message", structuredClone(message)));
    },
    on: (event, listener) => self.on(event, listener),
    off: (event, listener) => self.off(event, listener),
  });
  return [end(a, b), end(b, a), wire];
}

describe("the core IPC protocol", () => {
  it("is declared like a feature's types, under its wire names", () => {
    const declared = [workerReady, workerHeartbeat, workerDraining, workerFailed, primaryShutdown];
    expect(declared.map(({ kind, name }) => `${kind} ${name}`)).toEqual(["message ready", "message heartbeat", "message draining", "message failed", "message shutdown"]);
    for (const type of declared) expect(Object.isFrozen(type)).toBe(true);
    // A feature cannot take a core name: its names carry a prefix.
    expect(() => defineIpcMessage("ready")).toThrow('IPC type "ready" must be "<integration>:<name>"');
  });

  it("travels in the one envelope, heard by the declared type", async () => {
    const [worker, primary, wire] = pair();
    const workerSide = new Channel(worker);
    const primarySide = new Channel(primary);
    const heard = new Promise((resolve) => primarySide.on(workerFailed, resolve));
    workerSide.send(workerFailed, { reason: "boom" });
    expect(await heard).toEqual({ reason: "boom" });
    expect(wire).toEqual([{ keelson: 1, type: "failed", payload: { reason: "boom" } }]);
  });

  it("is never named by a bare string in keelson's own code", () => {
    const files = ["src", "supervisor"].flatMap((folder) => readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts")).map((file) => join(folder, file)));
    // On a channel: `channel.on("ready", …)`, `primary.send("draining", …)`, `clusterChannel()?.send("failed", …)`.
    const bare = /(channel|primary|\)\??)\.(send|on)\("(ready|heartbeat|draining|failed|shutdown)"/;
    const found = files.filter((file) => bare.test(readFileSync(join(ROOT, file), "utf8")));
    expect(found).toEqual([]);
  });
});

describe("the supervisor's door", () => {
  it("is the FeatureHost only: no public handle, onMessage or onWorker for 1.0", () => {
    for (const name of ["handle", "onMessage", "onWorker"]) expect(name in Supervisor.prototype, name).toBe(false);
  });
});
