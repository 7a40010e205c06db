// A load of one new TCP connection per request, which autocannon cannot make (it keeps its
// connections alive): `close-load.ts <port> <concurrency> <seconds> [path] [rate]` keeps
// `concurrency` requests in flight, each `GET path` with `Connection: close` on a fresh connection,
// for `seconds`, at most `rate` connections per second in all when given (so two servers compare at
// the same rate: a primary's cost per connection falls as more of them arrive per wake-up), then
// prints one line `RESULT {"ok":…,"failed":…,"errors":{…},"seconds":…}` and exits. Raw sockets, not
// node:http with `agent: false`: the generator's own cost per connection stays small, so one core
// of it can keep a server core busy.
import * as net from "node:net";

const [portArg, concurrencyArg = "50", secondsArg = "10", path = "/hello", rateArg] = process.argv.slice(2);
const port = Number(portArg);
const seconds = Number(secondsArg);
if (!Number.isInteger(port) || !(seconds > 0)) throw new Error("usage: close-load.ts <port> <concurrency> <seconds> [path]");
const request = Buffer.from(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
const OK = "HTTP/1.1 200";
let ok = 0;
let failed = 0;
const errors: Record<string, number> = {};
const started = performance.now();
const deadline = started + seconds * 1000;

function once(): Promise<void> {
  return new Promise((resolve) => {
    let head = "";
    let done = false;
    const finish = (why?: string) => {
      if (done) return;
      done = true;
      if (why === undefined) ok++;
      else {
        failed++;
        errors[why] = (errors[why] ?? 0) + 1;
      }
      socket.destroy();
      resolve();
    };
    const socket = net.connect({ port, host: "127.0.0.1" }, () => socket.write(request));
    socket.setTimeout(10_000, () => finish("timeout"));
    socket.on("data", (chunk: Buffer) => {
      if (head.length < OK.length) head += chunk.toString("latin1", 0, Math.min(chunk.length, OK.length));
    });
    // The server closes after its answer: the whole response has arrived.
    socket.on("end", () => finish(head.startsWith(OK) ? undefined : `status ${head.slice(9, 12) || "none"}`));
    socket.on("error", (error: NodeJS.ErrnoException) => finish(error.code ?? error.message));
  });
}

const interval = rateArg === undefined ? 0 : 1000 / Number(rateArg);
let next = started;

async function loop(): Promise<void> {
  while (performance.now() < deadline) {
    if (interval > 0) {
      // Each connection takes the next slot of the schedule, whichever loop is free.
      const wait = (next = Math.max(next + interval, performance.now())) - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    await once();
  }
}

await Promise.all(Array.from({ length: Number(concurrencyArg) }, loop));
const elapsed = (performance.now() - started) / 1000;
process.stdout.write(`RESULT ${JSON.stringify({ ok, failed, errors, seconds: elapsed })}\n`);
