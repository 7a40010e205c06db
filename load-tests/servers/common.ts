// Helpers shared by every server under test, so the only thing that differs
// between targets is the framework code itself.
import type { IncomingMessage } from "node:http";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";

/** Servers bind to loopback only: the benchmark never needs another interface. */
export const HOST = "127.0.0.1";

export function port(): number {
  const value = Number(process.env.PORT);
  if (!Number.isInteger(value) || value <= 0 || value > 65_535) {
    throw new Error(`PORT must be a TCP port, got ${JSON.stringify(process.env.PORT)}`);
  }
  return value;
}

/** The harness waits for this exact line on stdout before it sends load. */
export function announceReady(listeningPort: number): void {
  process.stdout.write(`READY ${listeningPort}\n`);
}

/** For servers whose start promise does not mark readiness: poll our own socket. */
export async function waitUntilAccepting(listeningPort: number, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const accepted = await new Promise<boolean>((resolve) => {
      const socket = net.connect(listeningPort, HOST);
      socket.once("connect", () => {
        socket.destroy();
        resolve(true);
      });
      socket.once("error", () => resolve(false));
    });
    if (accepted) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`nothing accepted connections on ${HOST}:${listeningPort} within ${timeoutMs} ms`);
}

export interface NewBook {
  title: string;
  author: string;
}

export interface Book extends NewBook {
  id: string;
}

/** Hand-written validation, equivalent to the zod / JSON-schema rules used elsewhere. */
export function isNewBook(value: unknown): value is NewBook {
  if (typeof value !== "object" || value === null) return false;
  const { title, author } = value as Record<string, unknown>;
  return typeof title === "string" && title.length >= 1 && title.length <= 200 && typeof author === "string";
}

export function book(id: string): Book {
  return { id, title: `Book ${id}`, author: "Anonymous" };
}

export function createdBook(input: NewBook): Book {
  return { title: input.title, author: input.author, id: "1" };
}

/** Log files go where the harness says (a temp dir it deletes), else the OS temp dir. */
export function logFile(name: string): string {
  const dir = process.env.BENCH_LOG_DIR ?? os.tmpdir();
  return path.join(dir, `${name}-${process.pid}.log`);
}

/** JSON schema equivalent of isNewBook, for frameworks that validate from schemas. */
export const newBookJsonSchema = {
  type: "object",
  required: ["title", "author"],
  properties: {
    title: { type: "string", minLength: 1, maxLength: 200 },
    author: { type: "string" },
  },
} as const;

/** Largest body the node:http servers read. */
export const MAX_BODY_BYTES = 1 << 20;

/**
 * The node:http servers' body read: every chunk kept up to MAX_BODY_BYTES, then `done` with the
 * parsed JSON, or with the status and error of a body too large (413) or not JSON (400).
 */
export function collectJSONBody(req: IncomingMessage, done: (parsed: unknown, status?: number, error?: string) => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  req.on("data", (chunk: Buffer) => {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  });
  req.on("end", () => {
    if (size > MAX_BODY_BYTES) return done(undefined, 413, "body too large");
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return done(undefined, 400, "invalid JSON");
    }
    done(parsed);
  });
}
