// Peak RSS of a server taking N concurrent multipart uploads of S MB each, for the two ways a form
// body can be read: keelson's form routes (busboy, files spooled to disk) and Request.formData()
// (the web platform's parser, which holds the body in memory). `make build-bench` first.
// `node --import tsx load-tests/bench.ts uploads [--uploads 20] [--size-mb 50] [--rounds 3]`
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { adopt, killAllChildren } from "../../test/helpers/child.js";
import { freePort } from "../lib/server.js";
import { median } from "../lib/stats.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const { values } = parseArgs({ options: { uploads: { type: "string", default: "20" }, "size-mb": { type: "string", default: "50" }, rounds: { type: "string", default: "3" } } });
const uploads = Number(values.uploads);
const sizeMb = Number(values["size-mb"]);
const rounds = Number(values.rounds);
if (![uploads, sizeMb, rounds].every((n) => Number.isInteger(n) && n > 0)) {
  console.error("usage: node --import tsx load-tests/bench.ts uploads [--uploads N] [--size-mb N] [--rounds N]");
  process.exit(2);
}

/** VmHWM (peak resident set) of a process, MB. */
function peakRss(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmHWM:"));
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? NaN) / 1024;
}

/** One multipart body of `size` bytes, streamed in 1 MiB chunks so the client holds little of it. */
function body(size: number): { stream: ReadableStream<Uint8Array>; type: string; length: number } {
  const boundary = "keelsonbench";
  const head = new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  const tail = new TextEncoder().encode(`\r\n--${boundary}--\r\n`);
  const chunk = new Uint8Array(1024 * 1024).fill(7);
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(head);
    },
    pull(controller) {
      if (sent >= size) {
        controller.enqueue(tail);
        controller.close();
        return;
      }
      const next = chunk.subarray(0, Math.min(chunk.length, size - sent));
      sent += next.length;
      controller.enqueue(next);
    },
  });
  return { stream, type: `multipart/form-data; boundary=${boundary}`, length: head.length + size + tail.length };
}

async function round(mode: "busboy" | "formdata"): Promise<{ peakMb: number; seconds: number; ok: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, "dist/load-tests/servers/uploads.js"), mode, String(port)], { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
  adopt(child);
  await new Promise<void>((resolve) => child.stdout!.on("data", (chunk: Buffer) => { if (chunk.toString().includes("listening")) resolve(); }));
  const started = performance.now();
  const results = await Promise.all(Array.from({ length: uploads }, async () => {
    const { stream, type, length } = body(sizeMb * 1024 * 1024);
    const res = await fetch(`http://127.0.0.1:${port}/upload`, { method: "POST", body: stream, duplex: "half", headers: { "content-type": type, "content-length": String(length) } } as RequestInit);
    const answer = await res.json() as { size?: number };
    return res.status === 200 && answer.size === sizeMb * 1024 * 1024;
  }));
  const seconds = (performance.now() - started) / 1000;
  const peakMb = peakRss(child.pid!);
  child.kill("SIGTERM");
  await new Promise((resolve) => child.once("exit", resolve));
  return { peakMb, seconds, ok: results.filter(Boolean).length };
}

console.log(`${uploads} concurrent uploads of ${sizeMb} MB, ${rounds} interleaved rounds: server peak RSS (VmHWM) and wall time`);
const samples: Record<string, Array<{ peakMb: number; seconds: number; ok: number }>> = { busboy: [], formdata: [] };
try {
  for (let r = 0; r < rounds; r++) {
    for (const mode of ["busboy", "formdata"] as const) samples[mode]!.push(await round(mode));
  }
} finally {
  killAllChildren();
}
for (const [mode, runs] of Object.entries(samples)) {
  console.log(`${mode.padEnd(9)} peak RSS median ${(median(runs.map((s) => s.peakMb)) ?? NaN).toFixed(0)} MB (${runs.map((s) => s.peakMb.toFixed(0)).join(", ")}), `
    + `wall ${(median(runs.map((s) => s.seconds)) ?? NaN).toFixed(1)} s, uploads stored ${runs.map((s) => `${s.ok}/${uploads}`).join(", ")}`);
}
