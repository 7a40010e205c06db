import type { IncomingMessage, ServerResponse } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { PORT_RULE, checkNumber } from "../checks.js";
import { PROMETHEUS_CONTENT_TYPE } from "./metric-set.js";

// Required, not imported: the first ESM import of node:http builds its module namespace, which reads
// every export, the lazy ones that load undici included, and the supervisor's primary (which
// imports node:http nowhere else) would be blocked for that while its workers ask it to listen.
const { createServer } = createRequire(import.meta.url)("node:http") as typeof import("node:http");

/**
 * A listener of its own for the Prometheus scrape, apart from the service port: used by the
 * supervisor's primary (cluster-wide) and by `createPrometheus({ port })` without it. Plain
 * node:http and no prom-client, so the primary stays light. It answers `GET`/`HEAD` on `path`
 * only, with no CORS headers: a scraper is not a browser, and no web page should read it.
 */

/** Where and what the metrics listener serves. */
export interface MetricsListenerOptions {
  /** 0 picks a free port (see `port` of the result). */
  port: number;
  /** Default: all interfaces, like the service port (Prometheus in Kubernetes scrapes the pod IP). */
  host?: string;
  /** Default `/metrics`. */
  path?: string;
  /** The exposition text; a rejection answers 500 without its message. */
  read(): Promise<string>;
  /** Called with a failed read's error (the response says only that it failed). */
  onError?(error: unknown): void;
}

/** An open metrics listener. */
export interface MetricsListener {
  readonly port: number;
  /** `http://[::]:9464/metrics` when bound to every interface, `http://127.0.0.1:9464/metrics` to that one. */
  readonly url: string;
  /** Stops accepting and closes every connection (a scraper's keep-alive one included). */
  close(): Promise<void>;
}

/** Opens the listener; rejects with a one-line reason (`port 9464 is already in use (EADDRINUSE)`). */
export async function openMetricsListener(options: MetricsListenerOptions): Promise<MetricsListener> {
  const { port, host } = options;
  checkNumber(port, "metrics port", PORT_RULE);
  const path = options.path ?? "/metrics";
  const server = createServer((req, res) => {
    answer(req, res, path, options).catch(() => {
      // Only a request Node accepted but URL cannot parse gets here: never a crash of the process.
      if (!res.headersSent) send(res, 400, "bad request\n");
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host }, () => {
      server.off("error", reject);
      resolve();
    });
  }).catch((error: NodeJS.ErrnoException) => {
    const where = host === undefined ? `port ${port}` : `${host}:${port}`;
    throw new Error(`cannot serve metrics on ${where}: ${error.code === "EADDRINUSE" ? "already in use (EADDRINUSE)" : error.message}`, { cause: error });
  });
  const { port: bound, address } = server.address() as AddressInfo;
  // The address actually bound (`[::]` for every interface), as the service's own ready line names it.
  const shown = address.includes(":") ? `[${address}]` : address;
  let closing: Promise<void> | undefined;
  return {
    port: bound,
    url: `http://${shown}:${bound}${path}`,
    close: () => (closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    })),
  };
}

async function answer(req: IncomingMessage, res: ServerResponse, path: string, options: MetricsListenerOptions): Promise<void> {
  const url = new URL(req.url ?? "/", "http://metrics.invalid");
  if (url.pathname !== path) return send(res, 404, "not found\n");
  if (req.method !== "GET" && req.method !== "HEAD") return send(res, 405, "method not allowed\n", { allow: "GET, HEAD" });
  let text: string;
  try {
    text = await options.read();
  } catch (error) {
    options.onError?.(error);
    return send(res, 500, "metrics unavailable\n");
  }
  send(res, 200, req.method === "HEAD" ? undefined : text, { "content-type": PROMETHEUS_CONTENT_TYPE }, Buffer.byteLength(text));
}

function send(res: ServerResponse, status: number, body: string | undefined, headers: Record<string, string> = {}, length?: number): void {
  res.writeHead(status, {
    "content-type": "text/plain; charset=utf-8", "cache-control": "no-store", "x-content-type-options": "nosniff",
    ...headers, "content-length": String(length ?? Buffer.byteLength(body ?? "")),
  });
  res.end(body);
}
