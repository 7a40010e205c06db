// One HTTP/1.1 request over a fresh TCP connection, written byte for byte: for requests no
// well-behaved client library would send (bad encodings, lying Content-Length, huge headers).
// Always bounded in time; never rejects: failures are part of the result.
import * as net from "node:net";

export interface RawRequest {
  /** Request line and headers, without the blank line that ends them. */
  head: string;
  body?: string;
  /** Stream this chunk (chunked encoding) until `streamBytes` are sent or the server answers. */
  stream?: { chunk: Buffer; streamBytes: number };
  /** After writing: wait for the answer (default), half-close our side, or drop the connection. */
  ending?: "wait" | "half-close" | "destroy";
  timeoutMs?: number;
}

export interface RawResponse {
  /** null when nothing parseable came back. */
  status: number | null;
  reason: string;
  headers: Record<string, string>;
  body: string;
  /** A socket error or `timeout`; a response may still have arrived before it. */
  error: string | null;
}

function decodeChunked(text: string): string {
  let out = "";
  let at = 0;
  for (let guard = 0; guard < 100_000 && at < text.length; guard++) {
    const lineEnd = text.indexOf("\r\n", at);
    if (lineEnd < 0) break;
    const size = Number.parseInt(text.slice(at, lineEnd), 16);
    if (!Number.isFinite(size) || size <= 0) break;
    out += text.slice(lineEnd + 2, lineEnd + 2 + size);
    at = lineEnd + 2 + size + 2;
  }
  return out;
}

export function parseResponse(raw: string, error: string | null): RawResponse {
  const split = raw.indexOf("\r\n\r\n");
  const statusLine = /^HTTP\/1\.[01] (\d{3}) ?(.*)$/.exec(raw.slice(0, raw.indexOf("\r\n")));
  if (split < 0 || !statusLine) return { status: null, reason: "", headers: {}, body: "", error: error ?? (raw ? "unparseable response" : "no response") };
  const headers: Record<string, string> = {};
  for (const line of raw.slice(0, split).split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = raw.slice(split + 4);
  const body = /chunked/i.test(headers["transfer-encoding"] ?? "") ? decodeChunked(rest) : rest;
  return { status: Number(statusLine[1]), reason: statusLine[2] ?? "", headers, body, error };
}

export function rawRequest(port: number, request: RawRequest): Promise<RawResponse> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let error: string | null = null;
    let answered = false;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseResponse(Buffer.concat(chunks).toString("latin1"), error));
    };
    const timer = setTimeout(() => {
      error ??= "timeout";
      finish();
    }, request.timeoutMs ?? 10_000);
    socket.on("data", (chunk: Buffer) => {
      answered = true;
      chunks.push(chunk);
    });
    socket.on("error", (e: NodeJS.ErrnoException) => {
      error ??= e.code ?? e.message;
      finish();
    });
    socket.on("close", finish);
    socket.on("end", finish);
    socket.once("connect", () => {
      socket.write(`${request.head}\r\n\r\n`);
      if (request.body !== undefined) socket.write(request.body);
      const after = (): void => {
        if (request.ending === "half-close") socket.end();
        else if (request.ending === "destroy") {
          setTimeout(() => {
            error ??= "closed by the client";
            finish();
          }, 20);
        }
      };
      const stream = request.stream;
      if (!stream) return after();
      let sent = 0;
      // Writes until the socket pushes back, then resumes on 'drain'; stops once the server answered.
      const pump = (): void => {
        if (answered || done) return;
        for (let writable = true; sent < stream.streamBytes; ) {
          if (!writable) {
            socket.once("drain", pump);
            return;
          }
          sent += stream.chunk.length;
          writable = socket.write(`${stream.chunk.length.toString(16)}\r\n`) && socket.write(stream.chunk) && socket.write("\r\n");
        }
        socket.write("0\r\n\r\n", after);
      };
      pump();
    });
  });
}

export interface PoliteLoadResult {
  /** Requests written on a connection the server had not announced to close. */
  sent: number;
  answered: number;
  non2xx: number;
  /** Written, then the connection ended or failed without their answer. */
  lost: number;
  /** Connection attempts refused (nothing was written on them). */
  refused: number;
}

/**
 * A well-behaved keep-alive client, as a counterpart to autocannon (which keeps writing on a
 * connection after a `Connection: close` answer): `connections` sockets, one request at a time
 * each (GET `path`), a new connection after `Connection: close`, until `signal` aborts; a refused
 * connect is retried after 20 ms, and it all stops after `maxMs` whatever happens. Answers need a
 * Content-Length (keelson always sends one).
 */
export async function politeLoad(port: number, path: string, connections: number, stop: AbortSignal, maxMs = 120_000): Promise<PoliteLoadResult> {
  const signal = AbortSignal.any([stop, AbortSignal.timeout(maxMs)]);
  const result: PoliteLoadResult = { sent: 0, answered: 0, non2xx: 0, lost: 0, refused: 0 };
  // One abort listener for all sockets. Once stopped, an answer still outstanding gets 2 s before it counts as lost.
  const open = new Map<net.Socket, () => boolean>();
  const onAbort = (): void => {
    for (const [socket, outstanding] of open) {
      if (!outstanding()) socket.end();
      setTimeout(() => socket.destroy(), 2_000).unref();
    }
  };
  signal.addEventListener("abort", onAbort, { once: true });
  const connection = (): Promise<void> => new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    let buffer = Buffer.alloc(0);
    let outstanding = false;
    open.set(socket, () => outstanding);
    let connected = false;
    const send = (): void => {
      if (signal.aborted) {
        socket.end();
        return;
      }
      outstanding = true;
      result.sent++;
      socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    };
    socket.on("connect", () => {
      connected = true;
      send();
    });
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString("latin1");
        const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buffer.length < end + 4 + length) return;
        buffer = buffer.subarray(end + 4 + length);
        outstanding = false;
        result.answered++;
        const status = Number(head.slice(9, 12));
        if (!(status >= 200 && status < 300)) result.non2xx++;
        if (/\r\nconnection:\s*close/i.test(head)) {
          socket.end();
          return;
        }
        send();
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      if (!connected && error.code === "ECONNREFUSED") result.refused++;
    });
    socket.on("close", () => {
      open.delete(socket);
      if (outstanding) result.lost++;
      resolve();
    });
  });
  await Promise.all(Array.from({ length: connections }, async () => {
    // Bounded by the caller's signal; every round trip is a fresh connection or a refused one.
    while (!signal.aborted) {
      const refusedBefore = result.refused;
      await connection();
      if (result.refused > refusedBefore) await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }));
  signal.removeEventListener("abort", onAbort);
  return result;
}
