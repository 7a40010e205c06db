/**
 * The docs bundle (4.4 MB) to many clients that read nothing: every response shares the one
 * in-memory copy, so the worker's RSS barely moves. Real process, real sockets.
 */
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { gunzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { loadScalarBundle } from "../src/docs/assets.js";
import { killAll, startService } from "./fixtures/lifecycle-harness.js";

afterEach(() => killAll());

const SLOW_READERS = 100;
const GZIP_READERS = 20;
// A copy per response would add 4.4 MB each (80 plain ones: ~350 MB); shared, it is a few MB.
const RSS_BOUND_MB = 60;

function rssMB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
}

/** Sends the request and never reads: the kernel buffers fill up and the server's writes stall. */
function slowReader(port: number, gzip: boolean): Socket {
  const socket = connect(port, "127.0.0.1", () => {
    socket.write(`GET /docs/scalar.js HTTP/1.1\r\nHost: x\r\n${gzip ? "Accept-Encoding: gzip\r\n" : ""}\r\n`);
  });
  socket.pause();
  socket.on("error", () => {});
  return socket;
}

/** Resumes a paused reader and resolves with its whole answer: head and body. */
function readAll(socket: Socket): Promise<{ head: string; body: Buffer }> {
  const chunks: Buffer[] = [];
  return new Promise((resolve) => {
    const done = () => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf("\r\n\r\n");
      const head = all.subarray(0, end).toString("latin1");
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? Number.NaN);
      if (all.length - end - 4 < length) return false;
      resolve({ head, body: all.subarray(end + 4, end + 4 + length) });
      socket.destroy();
      return true;
    };
    socket.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      done();
    });
    socket.resume();
  });
}

describe("GET /docs/scalar.js to clients that read nothing", () => {
  it(`${SLOW_READERS} slow readers (plain and gzip) add less than ${RSS_BOUND_MB} MB of RSS, and each still gets the whole bundle`, async () => {
    const service = await startService({});
    const pid = service.child.pid!;
    // The bundle is read on first use: load it before the baseline, with a client that reads it all.
    const first = await readAll(slowReader(service.port, false));
    expect(first.head).toMatch(/^HTTP\/1\.1 200 /);
    const before = rssMB(pid);

    const readers = Array.from({ length: SLOW_READERS }, (_, i) => slowReader(service.port, i < GZIP_READERS));
    // Each response is built (and logged) before its first byte is written: once all are logged,
    // a per-response copy would exist.
    for (let waited = 0; service.count(/GET \/docs\/scalar\.js 200/) < SLOW_READERS + 1; waited += 20) {
      if (waited > 30_000) throw new Error(`only ${service.count(/GET \/docs\/scalar\.js 200/)} responses logged:\n${service.output()}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const grown = rssMB(pid) - before;
    expect(grown, `RSS ${before.toFixed(0)} MB -> +${grown.toFixed(0)} MB`).toBeLessThan(RSS_BOUND_MB);

    const bundle = await loadScalarBundle();
    const [gzip, plain] = await Promise.all([readAll(readers[0]!), readAll(readers.at(-1)!)]);
    expect(gzip.head).toMatch(/content-encoding: gzip/i);
    expect(gunzipSync(gzip.body).equals(Buffer.from(bundle.body))).toBe(true);
    expect(plain.body.equals(Buffer.from(bundle.body))).toBe(true);
    for (const socket of readers) socket.destroy();
  });
});
