// Bytes on the wire with and without compress(), for the bodies a JSON API sends: one book, a page
// of 20 and a list of 100 (the bookstore's shape), per encoding. What encoding costs per request is
// counted by `make bench-instructions TARGETS=keelson,keelson-compress ACCEPT_ENCODING=gzip`.
//
//   node --import tsx load-tests/compress-bytes.ts
import { App, compress, get, newLoggerWithFormat } from "../src/index.js";

const book = (i: number) => ({ id: i, title: `The Book Number ${i}`, author: `Author ${i % 17}`, year: 1900 + (i % 120), isbn: `978-3-16-${String(148410 + i).padStart(6, "0")}-0`, tags: ["fiction", i % 2 ? "classic" : "modern"] });
const bodies = { "1 book": book(1), "20 books": Array.from({ length: 20 }, (_, i) => book(i)), "100 books": Array.from({ length: 100 }, (_, i) => book(i)) };

const logger = newLoggerWithFormat(true, "json").withWriter({ write: () => undefined });
const plain = new App({ logger, env: "production" });
const compressed = new App({ logger, env: "production" });
compressed.use(compress());
for (const [name, body] of Object.entries(bodies)) {
  const path = `/${name.replace(" ", "-")}`;
  plain.route(get(path, () => body));
  compressed.route(get(path, () => body));
}

async function size(app: App, path: string, encoding?: string): Promise<{ bytes: number; encoding: string }> {
  const response = await app.request(path, { headers: encoding === undefined ? {} : { "accept-encoding": encoding } });
  return { bytes: (await response.arrayBuffer()).byteLength, encoding: response.headers.get("content-encoding") ?? "identity" };
}

console.log(`Node ${process.version}`);
const encodings = ["gzip", "br", ...("zstdCompress" in (await import("node:zlib")) ? ["zstd"] : [])];
console.log(`| body | identity | ${encodings.join(" | ")} |`);
console.log(`|---|---|${encodings.map(() => "---|").join("")}`);
for (const name of Object.keys(bodies)) {
  const path = `/${name.replace(" ", "-")}`;
  const raw = await size(plain, path);
  const sizes = [];
  for (const encoding of encodings) sizes.push(await size(compressed, path, encoding));
  const cells = sizes.map((s) => s.encoding === "identity" ? `${s.bytes} (not encoded: under the threshold)` : `${s.bytes} (${(100 * s.bytes / raw.bytes).toFixed(0)} %)`);
  console.log(`| ${name} | ${raw.bytes} | ${cells.join(" | ")} |`);
}
