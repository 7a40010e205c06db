import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "../harness/child.js";
import { usePostgres } from "./helpers/postgres.js";

// The bookstore under the real supervisor with 4 workers (CLI from source), on a shared database:
// every write made through one worker is read back through the others.
const ROOT = resolve(import.meta.dirname, "..");
const WORKERS = 4;
const BOOKS = 200;
/** The write routes need a bearer token with books:write: the one `make token` prints (its recipe's command, run here). */
const TOKEN_COMMAND = /^token:.*\n\t@(node --import tsx examples\/bookstore\/token\.ts)$/m.exec(readFileSync(join(ROOT, "Makefile"), "utf8"))?.[1];
const token = execFileSync(process.execPath, ["--import", "tsx", "examples/bookstore/token.ts"], { cwd: ROOT, encoding: "utf8" }).trim();
const dir = mkdtempSync(join(tmpdir(), "keelson-example-"));
const pg = usePostgres();

beforeAll(() => {
  expect(TOKEN_COMMAND, "make token's recipe").toBe("node --import tsx examples/bookstore/token.ts");
});

afterEach(killAllChildren);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function startBookstore(env: Record<string, string>): Promise<number> {
  const port = await freePort();
  const child = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "examples/bookstore/main.ts",
    "--workers", String(WORKERS), "--port", String(port)], { cwd: ROOT, env: { NODE_ENV: "development", ...env }, group: true });
  // Each worker logs this line once its startup (schema and seed included) is done.
  await child.waitUntil((out) => out.split("\n").filter((line) => /bookstore listening on/.test(line)).length >= WORKERS, {
    timeoutMs: 60_000, what: `${WORKERS} workers listening`,
  });
  return port;
}

/** The fields of the bookstore's answers these tests read (a book, a page, a health report). */
interface Answer { id: string; title: string; data: { id: string }[]; checks: Record<string, string> }

/** One request on its own connection (no keep-alive): the supervisor spreads them over the workers. */
function call(port: number, method: string, path: string, body?: unknown): Promise<{ status: number; body: Answer }> {
  return new Promise((resolveCall, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request({
      host: "127.0.0.1", port, path, method, agent: false, timeout: 30_000,
      headers: {
        connection: "close", authorization: `Bearer ${token}`,
        ...(payload ? { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } : {}),
      },
    }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolveCall({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
    });
    req.on("timeout", () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on("error", reject);
    req.end(payload);
  });
}

async function writesAreSharedByEveryWorker(port: number): Promise<void> {
  const posted = await Promise.all(Array.from({ length: BOOKS }, (_, i) =>
    call(port, "POST", "/api/books", { title: `Book ${i}`, author: `Author ${i}`, year: 1900 + (i % 100) })));
  expect(posted.map((r) => r.status)).toEqual(posted.map(() => 201));
  const ids = posted.map((r) => r.body.id);
  expect(new Set(ids).size).toBe(BOOKS);

  // Every id read back, each on a fresh connection, so through every worker.
  const read = await Promise.all(ids.map((id) => call(port, "GET", `/api/books/${id}`)));
  const missing = read.flatMap((r, i) => (r.status === 200 && r.body.title === `Book ${i}` ? [] : [`${ids[i]}: ${r.status}`]));
  expect(missing).toEqual([]);

  const listed: string[] = [];
  for (let page = 1; page <= 3; page++) listed.push(...(await call(port, "GET", `/api/books?limit=100&page=${page}`)).body.data.map((b) => b.id));
  expect(listed.length).toBe(BOOKS + 3);
  expect(new Set(listed).size).toBe(BOOKS + 3);
  expect(listed.slice(0, 3)).toEqual(["b1", "b2", "b3"]);

  // The sequence: a book replaced and deleted through whichever workers answer.
  const [first] = ids as [string];
  expect((await call(port, "PUT", `/api/books/${first}`, { title: "Replaced", author: "Someone" })).status).toBe(200);
  for (let i = 0; i < WORKERS; i++) expect((await call(port, "GET", `/api/books/${first}`)).body.title).toBe("Replaced");
  expect((await call(port, "DELETE", "/api/books/b3")).status).toBe(204);
  for (let i = 0; i < WORKERS; i++) expect((await call(port, "DELETE", "/api/books/b3")).status).toBe(404);
  expect((await call(port, "GET", "/health")).body.checks).toEqual({ database: "UP" });

  // A cover uploaded through one worker is read back, byte for byte, through the others.
  const image = new Uint8Array(300 * 1024).map((_, i) => (i * 31) % 251);
  const form = new FormData();
  form.append("cover", new File([image], "cover.png", { type: "image/png" }));
  const uploaded = await fetch(`http://127.0.0.1:${port}/api/books/${first}/cover`, { method: "PUT", body: form, headers: { authorization: `Bearer ${token}` } });
  expect(uploaded.status).toBe(204);
  for (let i = 0; i < WORKERS * 2; i++) {
    const cover = await fetch(`http://127.0.0.1:${port}/api/books/${first}/cover`, { headers: { connection: "close" } });
    expect([cover.status, cover.headers.get("content-type")]).toEqual([200, "image/png"]);
    expect(Buffer.from(await cover.arrayBuffer()).equals(Buffer.from(image))).toBe(true);
  }
}

describe("the bookstore under the supervisor (4 workers)", () => {
  it("on one SQLite file: 200 concurrent POSTs, every book read back through every worker, none duplicated", async () => {
    await writesAreSharedByEveryWorker(await startBookstore({ BOOKSTORE_DB: join(dir, "data", "bookstore.db") }));
  }, 120_000);

  it("on PostgreSQL (DATABASE_URL): the same", async () => {
    await writesAreSharedByEveryWorker(await startBookstore({ DATABASE_URL: await pg.createDatabase() }));
  }, 120_000);
});
