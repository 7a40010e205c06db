// Equal work, counted: after every session the harness counts what the server emitted (request
// log lines, request-histogram samples, exported spans) and holds each against the responses it
// answered. A comparison between frameworks counts only when every target did the same work per
// response, and that is checked from what they emitted, never from how they were configured.
import * as fs from "node:fs";
import * as path from "node:path";
import { request } from "./http.js";

/** What a target emits per response. */
export interface Work {
  log: boolean;
  histogram: boolean;
  spans: boolean;
}

const NONE: Work = { log: false, histogram: false, spans: false };
const FULL: Work = { log: true, histogram: true, spans: false };
const FULL_SDK: Work = { log: true, histogram: true, spans: true };

/** Targets not listed emit nothing per response (the bare frameworks). */
export const WORK: Readonly<Record<string, Work>> = {
  "fastify-logger": { log: true, histogram: false, spans: false },
  "node-http-full": FULL,
  keelson: FULL,
  "keelson-schemas": FULL,
  "keelson-ratelimit": FULL,
  "keelson-idempotency": FULL,
  "keelson-otel": FULL_SDK,
  "fastify-full": FULL,
  "fastify-full-otel": FULL_SDK,
  "hono-full": FULL,
  "hono-full-otel": FULL_SDK,
};

export function workOf(target: string): Work {
  return WORK[target] ?? NONE;
}

/** The routes the harness requests (the bench routes and the CPU probe), as patterns and as paths. */
const ROUTES = new Set(["/hello", "/books/:id", "/books", "/__cpu"]);
const PATHS = new Set(["/hello", "/books/42", "/books", "/__cpu"]);

/** The responses a session received: `answered` for certain, up to `sent` (autocannon's in flight at its end). */
export interface Responses {
  answered: number;
  sent: number;
}

export interface Counts {
  logLines: number | null;
  histogramSamples: number | null;
  spans: number | null;
}

/** Samples of the request-duration histogram on the bench routes in a Prometheus exposition. */
export function histogramSamples(exposition: string): number {
  let samples = 0;
  for (const line of exposition.split("\n")) {
    const match = /^\w*request_duration_seconds_count\{([^}]*)\}\s+(\d+)/.exec(line);
    const route = match?.[1] === undefined ? undefined : /(?:^|,)(?:http_)?route="([^"]*)"/.exec(match[1])?.[1];
    if (route !== undefined && ROUTES.has(route)) samples += Number(match?.[2]);
  }
  return samples;
}

/** Spans on the bench routes in what GET /__spans answers (keys: `http.route`, else the span name). */
export function benchSpans(byRoute: Record<string, number>): number {
  let spans = 0;
  for (const [key, count] of Object.entries(byRoute)) {
    // A span named "GET /hello" counts for /hello.
    if (ROUTES.has(key.slice(key.indexOf(" ") + 1))) spans += count;
  }
  return spans;
}

async function fetchBody(url: string): Promise<string> {
  const res = await request(url, { timeoutMs: 5_000 });
  if (res.status !== 200) throw new Error(`GET ${url} answered ${res.status}`);
  return res.body;
}

/** Counted while the server still runs (the scrapes are requests on routes outside the bench's). */
export async function countLive(origin: string, work: Work): Promise<Pick<Counts, "histogramSamples" | "spans">> {
  return {
    histogramSamples: work.histogram ? histogramSamples(await fetchBody(`${origin}/metrics`)) : null,
    spans: work.spans ? benchSpans(JSON.parse(await fetchBody(`${origin}/__spans`)) as Record<string, number>) : null,
  };
}

function isBenchLine(line: string): boolean {
  let fields: Record<string, unknown>;
  try {
    fields = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return false;
  }
  return typeof fields.path === "string" && PATHS.has(fields.path);
}

/**
 * Request lines on the bench paths in the log files of `logDir`, counted as they grow: each call reads
 * only what was appended since the last one (a side-by-side run keeps its servers, and their logs,
 * for the whole run), and a line still being written counts once it ends.
 */
export class LogLineCounter {
  readonly #dir: string;
  readonly #files = new Map<string, { offset: number; partial: string }>();
  #lines = 0;

  constructor(dir: string) {
    this.#dir = dir;
  }

  count(): number {
    for (const name of fs.readdirSync(this.#dir)) {
      let file = this.#files.get(name);
      if (file === undefined) this.#files.set(name, (file = { offset: 0, partial: "" }));
      const fd = fs.openSync(path.join(this.#dir, name), "r");
      try {
        const chunk = Buffer.allocUnsafe(1 << 20);
        for (let read; (read = fs.readSync(fd, chunk, 0, chunk.length, file.offset)) > 0; ) {
          file.offset += read;
          // A chunk may end inside a multi-byte character: decode only up to its last newline.
          const end = chunk.lastIndexOf(10, read - 1);
          if (end === -1) {
            file.partial += chunk.toString("latin1", 0, read);
            continue;
          }
          const text = Buffer.from(file.partial, "latin1").toString("utf8") + chunk.toString("utf8", 0, end);
          file.partial = chunk.toString("latin1", end + 1, read);
          for (const line of text.split("\n")) if (line !== "" && isBenchLine(line)) this.#lines++;
        }
      } finally {
        fs.closeSync(fd);
      }
    }
    return this.#lines;
  }
}

/** Request lines on the bench paths in the log files of `logDir`, complete lines only. */
export function countLogLines(logDir: string): number {
  return new LogLineCounter(logDir).count();
}

/**
 * Why the counts do not show equal work, or null when each count lies within the responses. The
 * range, not one number: autocannon ends a timed run with requests still in flight, which a server
 * may or may not have answered, and frameworks differ there (@fastify/otel ends a span for an
 * aborted request, its log line and histogram skip it). Two lines, or a span per hook, per response
 * land far outside it.
 */
export function checkCounts(target: string, counts: Counts, responses: Responses): string | null {
  const problems: string[] = [];
  for (const [what, n] of [["log lines", counts.logLines], ["histogram samples", counts.histogramSamples], ["spans", counts.spans]] as const) {
    if (n !== null && (n < responses.answered || n > responses.sent)) problems.push(`${n} ${what} for ${responses.answered}..${responses.sent} responses`);
  }
  return problems.length === 0 ? null : `${target}: unequal work: ${problems.join("; ")}`;
}

/** One line for the report: what was counted and that it matched. */
export function describeCounts(counts: Counts, responses: Responses): string | null {
  const parts = [
    counts.logLines === null ? null : `${counts.logLines} log lines`,
    counts.histogramSamples === null ? null : `${counts.histogramSamples} histogram samples`,
    counts.spans === null ? null : `${counts.spans} spans`,
  ].filter((part) => part !== null);
  if (parts.length === 0) return null;
  return `${parts.join(", ")} for ${responses.answered}..${responses.sent} responses`;
}
