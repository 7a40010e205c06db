/**
 * keelson's own server takes node's requests itself (RequestPipeline.serveNode) and writes JSON
 * answers to node's response directly, where srvx would take a Response apart. Every case here is
 * sent, byte for byte, to two copies of one App: one listening (keelson's listener) and one served
 * by srvx's own node handler around `app.fetch` on the same kind of response object (what every
 * request took before), and the two answers must be the same bytes but for the Date and the
 * generated request id. The log lines of both must be the same too.
 */
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { getRequestHeader, getRouterParam, onResponse, removeRoute, setResponseHeader, setResponseStatus, type H3Event, type Middleware } from "h3";
import { toNodeHandler } from "srvx/node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { App, created, get, json, KError, post, type KConfig } from "../src/index.js";
import { pipelineOf } from "../src/app.js";
import { StandardReasonResponse } from "../src/http/status-line.js";
import { captureLogs, type LogCapture } from "./helpers/logs.js";
import { listenOn, type Listening } from "./helpers/listen.js";

const Book = z.object({ title: z.string(), author: z.string() });
const Stored = z.object({ id: z.string(), title: z.string(), author: z.string() });

/** `globalMiddleware`: false leaves out the App's one `use()` middleware, which stands between h3 and every route. */
function build(logs: LogCapture, hook?: (app: App) => void, globalMiddleware = true, config: Partial<KConfig> = {}): App {
  const app = new App({ port: 0, serviceName: "lane", env: "development", logger: logs.logger, ...config });
  app.route(get("/plain", () => ({ a: 1, text: "ünïcode" })));
  app.route(get("/books/:id", (ctx) => ({ id: ctx.params.id })));
  // A static path beside the params route, registered after it: h3's router answers it, not /books/:id.
  app.route(get("/books/special", () => ({ special: true })));
  app.route(get("/h3-params/:id", (ctx) => ({ id: getRouterParam(ctx.event, "id") ?? null, route: ctx.event.context.matchedRoute?.route ?? null })));
  app.route(get("/typed/:n", { params: z.object({ n: z.coerce.number().int() }) }, (ctx) => ({ n: ctx.params.n })));
  app.route(post("/books/:id/notes", { body: Book }, (ctx) => created({ book: ctx.params.id, ...ctx.body })));
  app.route(get("/status", () => json({ x: 1 }, 202)));
  app.route(get("/odd-status", () => json({ x: 1 }, 299)));
  app.route(get("/no-body-status", () => json({ x: 1 }, 304)));
  app.route(get("/extra-headers", () => json({ x: 1 }, 200, { "x-extra": "1", "cache-control": "no-store" })));
  app.route(post("/books", { body: Book, responses: { 201: Stored } }, (ctx) => created({ id: "7", ...ctx.body })));
  app.route(post("/located", { body: Book }, (ctx) => created({ id: "8", ...ctx.body }, "/books/8")));
  app.route(get("/set-status", (ctx) => {
    setResponseStatus(ctx.event, 203);
    return { set: true };
  }));
  app.route(get("/set-header", (ctx) => {
    setResponseHeader(ctx.event, "x-h3", "yes");
    return { set: true };
  }));
  app.route(get("/conflict", () => {
    throw new KError("CONFLICT", 409, "taken");
  }));
  app.route(get("/crash", () => {
    throw new Error("boom");
  }));
  app.route(get("/empty", () => undefined));
  app.route(get("/text", () => "hello"));
  app.route(get("/later", async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { later: true };
  }));
  // A json() that no route wrote: its body is written when it is sent, and this one cannot be.
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  if (globalMiddleware) app.use((event: H3Event, next: () => unknown) => (event.url.pathname === "/cyclic" ? json(cyclic) : next()));
  app.group("/mw", stamp).route(get("/plain", () => ({ mw: true }))).route(post("/books", { body: Book }, (ctx) => created({ id: "9", ...ctx.body })));
  app.route(post("/later", { body: Book }, async (ctx) => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return created({ id: "10", ...ctx.body });
  }));
  app.route(post("/refuse", { body: Book }, () => {
    throw new KError("CONFLICT", 409, "taken");
  }));
  app.route(post("/crash", { body: Book }, () => {
    throw new Error("boom");
  }));
  app.route(post("/any", (ctx) => ({ got: ctx.body ?? null })));
  // What a handler reads of its request: a static route's lane makes the h3 event only when asked.
  app.route(get("/query", (ctx) => ({ q: ctx.query })));
  app.route(get("/who", (ctx) => {
    ctx.logger.info("who asked");
    return { id: ctx.requestId, auth: ctx.auth ?? null, span: ctx.span.traceId };
  }));
  app.route(get("/header", (ctx) => ({ agent: getRequestHeader(ctx.event, "x-agent") ?? null })));
  app.route(get("/lang", (ctx) => ({ lang: ctx.lang })));
  app.route(get("/cyclic-route", () => json(cyclic)));
  app.route(get("/later-crash", async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    throw new KError("CONFLICT", 409, "later");
  }));
  app.route(post("/small", { body: Book, bodyLimit: 16 }, (ctx) => created({ id: "11", ...ctx.body })));
  app.route(post("/status-body", { body: Book }, (ctx) => {
    setResponseStatus(ctx.event, 202);
    return { accepted: ctx.body.title };
  }));
  hook?.(app);
  return app;
}

/** A group's middleware that sets a header after the handler ran. */
const stamp: Middleware = async (event, next) => {
  const value = await next();
  setResponseHeader(event, "x-mw", "1");
  return value;
};

/**
 * Every other line of a request (the handler's own, a 5xx's error line): its level, its first line (a
 * stack trace names other functions) and its request id, a generated one as "-"; sorted.
 */
function otherLines(entries: Record<string, unknown>[]): string[] {
  return entries.filter((entry) => !("status" in entry) && "request_id" in entry)
    .map(({ level, message, request_id }) => comparable(`${String(level)} ${String(message).split("\n")[0]} "request_id":"${String(request_id)}"`)).toSorted();
}

/** The request lines of a JSON capture, as `METHOD path status`, sorted. */
function requestLines(entries: Record<string, unknown>[]): string[] {
  return entries.filter((entry) => "status" in entry).map(({ method, path, status }) => `${String(method)} ${String(path)} ${String(status)}`).toSorted();
}

/**
 * One request on a fresh connection, closed by the server after its answer (`Connection: close`):
 * every byte of the answer. Not half-closed by the client: node then aborts a request still running.
 */
function exchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => (text += chunk));
    socket.on("end", () => resolve(text));
    socket.on("error", reject);
  });
}

/** The answer without what differs between two servers on purpose: the Date and a generated request id. */
function comparable(answer: string): string {
  return answer
    .replace(/^Date: .*$/im, "Date: -")
    .replace(/^x-request-id: [0-9a-f]{10}-\d+$/im, "x-request-id: -")
    .replace(/"request_id":"[0-9a-f]{10}-\d+"/, '"request_id":"-"');
}

interface Pair {
  app: App;
  lane: Listening;
  reference: Server;
  referencePort: number;
  laneLogs: LogCapture;
  referenceLogs: LogCapture;
}

async function startPair(hook?: (app: App) => void, globalMiddleware = true, config: Partial<KConfig> = {}): Promise<Pair> {
  const laneLogs = captureLogs("json");
  const referenceLogs = captureLogs("json");
  const app = build(laneLogs, hook, globalMiddleware, config);
  const lane = await listenOn(app);
  const referenceApp = build(referenceLogs, hook, globalMiddleware, config);
  const reference = createServer({ ServerResponse: StandardReasonResponse }, toNodeHandler(referenceApp.fetch) as Parameters<typeof createServer>[1]);
  await new Promise<void>((resolve) => reference.listen(0, "127.0.0.1", resolve));
  const address = reference.address();
  return { app, lane, reference, referencePort: typeof address === "object" && address ? address.port : 0, laneLogs, referenceLogs };
}

async function stopPair(pair: Pair): Promise<void> {
  await pair.lane.stop();
  await new Promise<void>((resolve) => pair.reference.close(() => resolve()));
}

function get1(path: string, extra = ""): string {
  return `GET ${path} HTTP/1.1\r\nHost: lane.test\r\nConnection: close\r\n${extra}\r\n`;
}

function post1(path: string, body: string, type = "application/json"): string {
  return `POST ${path} HTTP/1.1\r\nHost: lane.test\r\nConnection: close\r\nContent-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** A POST whose JSON body comes in `parts`, with `Transfer-Encoding: chunked` and no Content-Length. */
function postChunked(path: string, parts: readonly string[]): string {
  const chunks = parts.map((part) => `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`).join("");
  return `POST ${path} HTTP/1.1\r\nHost: lane.test\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${chunks}0\r\n\r\n`;
}

const CASES: ReadonlyArray<[string, string]> = [
  ["a plain value", get1("/plain")],
  ["a plain value, the query string ignored", get1("/plain?x=1&y=%20")],
  ["router params", get1("/books/42")],
  ["router params, a trailing slash", get1("/books/42/")],
  ["a static path beside router params", get1("/books/special")],
  ["router params with a dot segment", get1("/books/./42")],
  ["router params through a params schema", get1("/typed/7")],
  ["router params and the match read through ctx.event", get1("/h3-params/42")],
  ["router params that fail their schema", get1("/typed/seven")],
  ["router params and a body", post1("/books/42/notes", '{"title":"Dune","author":"Frank Herbert"}')],
  ["router params and a body that fails its schema", post1("/books/42/notes", '{"title":1}')],
  ["json() with a status", get1("/status")],
  ["json() with an unusual status", get1("/odd-status")],
  ["json() with a status that has no body", get1("/no-body-status")],
  ["json() with extra headers", get1("/extra-headers")],
  ["created() through a response schema", post1("/books", '{"title":"Dune","author":"Frank Herbert"}')],
  ["created() with a Location", post1("/located", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a body that fails its schema", post1("/books", '{"title":1}')],
  ["a body that is not JSON", post1("/books", "{nope")],
  ["a body of the wrong type", post1("/books", "title=Dune", "application/x-www-form-urlencoded")],
  ["a body read behind a group's middleware", post1("/mw/books", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a body, then an async handler", post1("/later", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a body, then a KError", post1("/refuse", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a body, then an unexpected error", post1("/crash", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a body too deep to parse", post1("/books", "[".repeat(300) + "]".repeat(300))],
  ["no body where one is read", post1("/any", "")],
  ["a body of another type on a route without a schema", post1("/any", "a=1", "application/x-www-form-urlencoded")],
  ["a status set with setResponseStatus", get1("/set-status")],
  ["a header set with h3's setResponseHeader", get1("/set-header")],
  ["a KError", get1("/conflict")],
  ["an unexpected error", get1("/crash")],
  ["undefined: 204", get1("/empty")],
  ["a string", get1("/text")],
  ["an async handler", get1("/later")],
  ["a group's middleware around the handler", get1("/mw/plain")],
  ["a json() from a middleware that JSON.stringify refuses", get1("/cyclic")],
  ["HEAD", "HEAD /plain HTTP/1.1\r\nHost: lane.test\r\nConnection: close\r\n\r\n"],
  ["an unknown path: 404", get1("/nope")],
  ["a known path, another method: 405", post1("/plain", "{}")],
  ["the client's request id, kept", get1("/plain", "X-Request-Id: client-id-1\r\n")],
  ["a malformed URL", get1("/%E0%A4%A")],
  ["a percent-encoded path", get1("/books/%34%32")],
  ["an absolute-form target", get1("http://lane.test/plain")],
  ["an Origin", get1("/plain", "Origin: https://app.example.com\r\n")],
  ["/health", get1("/health")],
  ["a query string the handler reads", get1("/query?x=1&y=%20&y=2")],
  ["the request id, logger, auth and span a handler reads", get1("/who", "X-Request-Id: client-id-2\r\n")],
  ["a request header read through ctx.event", get1("/header", "X-Agent: tester\r\n")],
  ["the language", get1("/lang", "Accept-Language: de-DE,de;q=0.9\r\n")],
  ["a json() the route's handler returns that JSON.stringify refuses", get1("/cyclic-route")],
  ["a KError after an await", get1("/later-crash")],
  ["a body over the route's limit, by its Content-Length", post1("/small", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a chunked body", postChunked("/books", ['{"title":"Dune",', '"author":"Frank Herbert"}'])],
  ["a Content-Length of 0 on a route with a body schema", post1("/books", "")],
  ["a JSON media type with a suffix", post1("/books", '{"title":"Dune","author":"Frank Herbert"}', "application/vnd.api+json")],
  ["a body with an Origin", post1("/books", '{"title":"Dune","author":"Frank Herbert"}').replace("Connection: close\r\n", "Connection: close\r\nOrigin: https://app.example.com\r\n")],
  ["a status set through ctx.event after the body", post1("/status-body", '{"title":"Dune","author":"Frank Herbert"}')],
  ["a static path with a trailing slash", get1("/plain/")],
  ["a static path spelled with a percent-encoding", get1("/pl%61in")],
];

// Without middleware in front of a route that reads a body, h3 hands the route's own promise back and
// the route's continuation answers itself (RequestState.routeResult); with one, the listener waits on it.
/**
 * The cases no lane serves even with no middleware in front of the routes: /health (its route has its
 * own middleware), /cyclic (no route then), HEAD, a group's routes (middleware), what srvx's URL or h3's
 * event would change (dot segments, percent-encoding), an absolute-form target, and a path no route has.
 */
const NOT_LANE = new Set([
  "/health", "a json() from a middleware that JSON.stringify refuses", "HEAD", "a body read behind a group's middleware",
  "a group's middleware around the handler", "router params with a dot segment", "a malformed URL", "a percent-encoded path",
  "a static path spelled with a percent-encoding", "an absolute-form target", "an unknown path: 404",
]);
const LANE_CASES = CASES.filter(([name]) => !NOT_LANE.has(name));

// Without middleware in front of a route that reads a body, h3 hands the route's own promise back and
// the route's continuation answers itself (RequestState.routeResult); with one, the listener waits on it.
// Without middleware, a static route is also served by its lane, with no h3 event unless asked for.
describe.each([
  ["with a middleware in front of every route", true, {}],
  ["with no middleware in front of the routes", false, {}],
  ["with no middleware and CORS for listed origins, with credentials", false, { cors: { origin: ["https://app.example.com"], credentials: true, exposeHeaders: ["x-total"] } }],
] as const)("keelson's own listener answers as srvx's would, %s", (_variant, globalMiddleware, config: Partial<KConfig>) => {
  let pair: Pair;
  beforeAll(async () => {
    pair = await startPair(undefined, globalMiddleware, config);
  });
  afterAll(() => stopPair(pair));

  it.each(CASES)("%s", async (_name, request) => {
    const [fromLane, fromReference] = await Promise.all([exchange(pair.lane.port, request), exchange(pair.referencePort, request)]);
    expect(fromLane).toMatch(/^HTTP\/1\.1 \d{3} /);
    expect(comparable(fromLane)).toBe(comparable(fromReference));
  });

  it("logs the same lines, one request line per request", () => {
    const fromLane = requestLines(pair.laneLogs.entries());
    expect(fromLane.length).toBe(CASES.length);
    expect(fromLane).toEqual(requestLines(pair.referenceLogs.entries()));
    expect(otherLines(pair.laneLogs.entries())).toEqual(otherLines(pair.referenceLogs.entries()));
  });

  it(globalMiddleware ? "served none of them by a lane" : "served exactly the static routes' requests by their lanes", () => {
    expect(CASES.length - LANE_CASES.length).toBe(NOT_LANE.size);
    expect(pipelineOf(pair.app).laneRequests, LANE_CASES.map(([name]) => name).join("\n")).toBe(globalMiddleware ? 0 : LANE_CASES.length);
  });
});

describe("keelson's lanes answer what h3's router answers", () => {
  let pair: Pair;
  beforeAll(async () => {
    pair = await startPair((app) => {
      // h3 answers a method and path with the route registered first for it: here, one without a lane.
      app.httpEngine.get("/first", () => ({ from: "httpEngine" }));
      app.route(get("/first", () => ({ from: "keelson" })));
      app.httpEngine.get("/first-params/:id", () => ({ from: "httpEngine" }));
      app.route(get("/first-params/:id", () => ({ from: "keelson" })));
    }, false);
  });
  afterAll(() => stopPair(pair));

  it("leaves a path to the route h3 answers it with, registered before a keelson route on the same path", async () => {
    for (const path of ["/first", "/first/", "/first-params/1"]) {
      const [fromLane, fromReference] = await Promise.all([exchange(pair.lane.port, get1(path)), exchange(pair.referencePort, get1(path))]);
      expect(fromLane).toMatch(/\{"from":"httpEngine"\}$/);
      expect(comparable(fromLane)).toBe(comparable(fromReference));
    }
    expect(pipelineOf(pair.app).laneRequests).toBe(0);
  });
});

// Each case on its own pair: once anything changes h3's routes or middleware, no lane serves again.
describe("keelson's lanes give way to what h3 is given after listen()", () => {
  let pair: Pair;
  beforeEach(async () => {
    pair = await startPair(undefined, false);
  });
  afterEach(() => stopPair(pair));

  it("gives a path to a route added on httpEngine after listen(), where a params route's lane took it before", async () => {
    const before = pipelineOf(pair.app).laneRequests;
    expect(await exchange(pair.lane.port, get1("/books/late"))).toMatch(/\{"id":"late"\}$/);
    expect(pipelineOf(pair.app).laneRequests).toBe(before + 1);
    pair.app.httpEngine.get("/books/late", () => ({ late: true }));
    expect(await exchange(pair.lane.port, get1("/books/late"))).toMatch(/\{"late":true\}$/);
    expect(pipelineOf(pair.app).laneRequests).toBe(before + 1);
  });

  it("runs middleware added to httpEngine, and no longer serves a route h3's removeRoute took out", async () => {
    const before = pipelineOf(pair.app).laneRequests;
    expect(await exchange(pair.lane.port, get1("/plain"))).toMatch(/^HTTP\/1\.1 200 /);
    expect(pipelineOf(pair.app).laneRequests).toBe(before + 1);

    pair.app.httpEngine.use((event: H3Event) => {
      setResponseHeader(event, "x-late", "1");
    });
    const answer = await exchange(pair.lane.port, get1("/plain"));
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/^x-late: 1$/im);
    expect(pipelineOf(pair.app).laneRequests).toBe(before + 1);

    // h3 no longer has the route; keelson's own route list still does, so its answer is a 405.
    removeRoute(pair.app.httpEngine, "GET", "/status");
    expect(await exchange(pair.lane.port, get1("/status"))).toMatch(/^HTTP\/1\.1 405 /);
    expect(pipelineOf(pair.app).laneRequests).toBe(before + 1);
  });
});

describe("keelson's own listener with an onResponse hook", () => {
  let pair: Pair;
  const seen: number[] = [];
  beforeAll(async () => {
    pair = await startPair((app) => {
      app.use(onResponse((response) => {
        seen.push(response.status);
      }));
    });
  });
  afterAll(() => stopPair(pair));

  it("hands every JSON answer to the hook as a Response, as h3 does", async () => {
    for (const request of [get1("/plain"), get1("/status"), post1("/books", '{"title":"Dune","author":"Frank Herbert"}')]) {
      const [fromLane, fromReference] = await Promise.all([exchange(pair.lane.port, request), exchange(pair.referencePort, request)]);
      expect(comparable(fromLane)).toBe(comparable(fromReference));
    }
    expect(seen.toSorted()).toEqual([200, 200, 201, 201, 202, 202]);
  });
});
