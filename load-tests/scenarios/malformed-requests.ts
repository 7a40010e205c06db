// The kinds of malformed request the `malformed` scenario sends to the example bookstore, each as
// a generator of raw requests (variant i of n), with the answers keelson is expected to give.
import { DEVELOPMENT_SECRET, signBookstoreToken } from "../../examples/bookstore/auth.js";
import type { RawRequest, RawResponse } from "../lib/raw-http.js";

export interface Kind {
  name: string;
  /** Statuses that are the right answer (anything else is reported, not failed, unless 5xx). */
  expected: number[];
  /**
   * This kind is (partly) refused by Node's HTTP parser before keelson sees it: such answers are
   * Node's own `HTTP/1.1 4xx <reason>` with no body, so they cannot be JSON.
   */
  parserLevel?: boolean;
  request(i: number): RawRequest;
}

// The example's write routes need a bearer token (scope books:write): these requests are about
// their bodies, so they carry one; the example runs without BOOKSTORE_JWT_SECRET, on the development key.
const CLOSE = `Host: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer ${await signBookstoreToken(DEVELOPMENT_SECRET, { subject: "malformed-scenario" })}`;
const json = (method: string, path: string, body: string, type = "application/json"): RawRequest => ({
  head: `${method} ${path} HTTP/1.1\r\n${CLOSE}\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}`,
  body,
});
const get = (path: string, headers = ""): RawRequest => ({ head: `GET ${path} HTTP/1.1\r\n${CLOSE}${headers}` });
const pick = <T>(list: readonly T[], i: number): T => list[i % list.length] as T;

const BROKEN_JSON = ['{"title": "Dune",', "{title: 'Dune'}", '{"title": "Dune", "author": }', "[1, 2,", '{"a": "\\u12"}', "nul", '"unterminated',
  "{}}", '{"title": "Dune"} trailing', "\u0000\u0001", '{"title": NaN}', "{'a':1}", '{"a":1,,"b":2}', "tru", "[]]"];
const WRONG_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "text/json", "json",
  "application/jsonx", "image/png", "text/html; charset=utf-8"];
const PAGINATION = ["?page=abc&limit=-5", "?page=-1&limit=abc", "?page=1e3", "?page=0x10&limit=2.5", "?page=&limit=", "?page=99999999999999999999999",
  "?limit=-5", "?limit=100000", "?page[]=1&limit[]=2", "?page=%00&limit=%FF", "?page=1&page=abc", "?page=NaN&limit=Infinity"];
const METHODS_405: Array<[string, string]> = [["DELETE", "/api/books"], ["PATCH", "/api/books/b1"], ["PUT", "/hello"], ["POST", "/hello"], ["PATCH", "/api/books"],
  ["DELETE", "/hello"], ["POST", "/api/books/b1"], ["PUT", "/health"]];
const BAD_ENCODINGS = ["/api/books/%E0%A4%A", "/api/books/%ZZ", "/api/books/%", "/hello%FF", "/api/books/%C3%28", "/api/%E0%A4%A/books", "/api/books/b1%",
  "/api/books/%ED%A0%80", "/%%30%30"];
const TRACEPARENTS = ["00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
  "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "00-4bf92f35-00f067aa-01",
  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "garbage", "00--", "-".repeat(2_000), "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
  "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g"];
const MIB = 1024 * 1024;

export const KINDS: Kind[] = [
  { name: "malformed JSON", expected: [400], request: (i) => json("POST", "/api/books", pick(BROKEN_JSON, i)) },
  { name: "wrong content-type", expected: [415], request: (i) => json("POST", "/api/books", '{"title":"Dune","author":"Frank Herbert"}', pick(WRONG_TYPES, i)) },
  {
    // The length is refused from the header alone; the client then waits for the answer.
    name: "oversized body, declared", expected: [413],
    request: () => ({ head: `POST /api/books HTTP/1.1\r\n${CLOSE}\r\nContent-Type: application/json\r\nContent-Length: ${2 * MIB}`, body: `{"title":"${"x".repeat(1_000)}` }),
  },
  {
    // Chunked, no length up front: refused while streaming, once past the 1 MiB limit.
    name: "oversized body, chunked", expected: [413],
    request: () => ({ head: `POST /api/books HTTP/1.1\r\n${CLOSE}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked`,
      stream: { chunk: Buffer.alloc(64 * 1024, 0x20), streamBytes: MIB + 256 * 1024 } }),
  },
  {
    name: "deeply nested JSON", expected: [400],
    request: (i) => {
      const depth = 300 + (i % 20) * 500;
      return json("POST", "/api/books", i % 2 === 0 ? "[".repeat(depth) + "]".repeat(depth) : '{"a":'.repeat(depth) + "1" + "}".repeat(depth));
    },
  },
  { name: "garbage pagination", expected: [200, 422], request: (i) => get(`/api/books${pick(PAGINATION, i)}`) },
  { name: "unknown route", expected: [404], request: (i) => get(pick(["/nope", "/api/nope/", "/api/books/b1/extra", "/%2e%2e/etc/passwd", "/api", "/hello/x"], i) + `?i=${i}`) },
  { name: "wrong method", expected: [405], request: (i) => ({ head: `${pick(METHODS_405, i)[0]} ${pick(METHODS_405, i)[1]} HTTP/1.1\r\n${CLOSE}\r\nContent-Length: 0` }) },
  { name: "bad URL encoding", expected: [400], request: (i) => get(pick(BAD_ENCODINGS, i)) },
  {
    name: "invalid traceparent", expected: [200],
    request: (i) => get("/api/books/b1", `\r\ntraceparent: ${pick(TRACEPARENTS, i)}${i % 3 === 0 ? "\r\ntracestate: ,,,=,%%%" : ""}`),
  },
  {
    // Node refuses request heads over 16 KiB (--max-http-header-size) with its own 431; under it the App answers.
    name: "huge headers", expected: [200, 431], parserLevel: true,
    request: (i) => get("/hello", i % 2 === 0 ? `\r\nx-filler: ${"a".repeat(12 * 1024)}` : `\r\nx-filler: ${"a".repeat(20 * 1024)}`),
  },
  {
    // Content-Length promises more than is sent, then the client half-closes (Node answers 400) or leaves.
    name: "truncated body", expected: [400], parserLevel: true,
    request: (i) => ({
      head: `POST /api/books HTTP/1.1\r\n${CLOSE}\r\nContent-Type: application/json\r\nContent-Length: 100`,
      body: '{"title":"Du', ending: i % 2 === 0 ? "half-close" : "destroy",
    }),
  },
];

/** What came back for one kind. */
export interface Tally {
  sent: number;
  statuses: Map<number, number>;
  noResponse: number;
  parserLevel: number;
  notJson: number;
  samples: string[];
}

export const newTally = (): Tally => ({ sent: 0, statuses: new Map(), noResponse: 0, parserLevel: 0, notJson: 0, samples: [] });

/** Counts one answer: its status, and whether it is JSON (with a string `code` unless 2xx). */
export function judge(kind: Kind, res: RawResponse, tally: Tally): void {
  if (res.status === null) {
    tally.noResponse++;
    return;
  }
  tally.statuses.set(res.status, (tally.statuses.get(res.status) ?? 0) + 1);
  if (kind.parserLevel && res.body === "" && res.headers["content-type"] === undefined) {
    tally.parserLevel++;
    return;
  }
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    body = undefined;
  }
  const hasCode = typeof body === "object" && body !== null && typeof (body as Record<string, unknown>).code === "string";
  if (body === undefined || (res.status >= 300 && !hasCode)) {
    tally.notJson++;
    if (tally.samples.length < 2) tally.samples.push(`${res.status} ${res.body.slice(0, 120)}`);
  }
}

export const countStatuses = (tally: Tally, test: (status: number) => boolean): number =>
  [...tally.statuses].filter(([status]) => test(status)).reduce((n, [, c]) => n + c, 0);
