// ctx.logger (the request logger), log levels and per-route log levels: the request id and trace id
// on every line in both formats, child() fields, the threshold from KConfig and LOG_LEVEL, an error
// level that never exits, and routes that leave the request log while metrics still count them.
import { afterEach, describe, expect, it, vi } from "vitest";
import { App, Logger, get, type KConfig, type LogFormat, type LogLevel, type MetricsCollector, type Span, type Tracer } from "../src/index.js";
import { MODES, type Mode } from "./helpers/both.js";
import { captureLogs } from "./helpers/logs.js";
import { listenOn, type Listening } from "./helpers/listen.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";

/** A tracer whose request spans all carry TRACE_ID, without an OpenTelemetry SDK. */
const tracer: Tracer = {
  startRequestSpan: () => span,
  endRequestSpan: () => {},
  startSpan: () => span,
};
const span: Span = { traceId: TRACE_ID, setAttribute() {}, recordException() {}, end() {} };

const servers: Listening[] = [];
afterEach(async () => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
  for (const server of servers.splice(0)) await server.stop();
});

/** A logger at `level` writing into memory, and its lines. */
function capture(format: LogFormat, level?: LogLevel) {
  const chunks: string[] = [];
  const logger = new Logger({ isProduction: false, format, level, output: { write: (chunk: string) => void chunks.push(chunk) } });
  const lines = (): string[] => {
    logger.flush();
    return chunks.join("").split("\n").filter((line) => line.length > 0);
  };
  return {
    logger, lines,
    entries: () => lines().map((line) => JSON.parse(line) as Record<string, unknown>),
    clear: () => void (logger.flush(), chunks.length = 0),
  };
}

interface Served {
  app: App;
  fetch(path: string, init?: RequestInit): Promise<Response>;
  logs: ReturnType<typeof capture>;
  observed: Array<[string, string, number]>;
}

/**
 * The app of these cases, reached in-process or over a real socket, with a metrics collector. Its
 * logger captures in `format` at `level` (debug unless told).
 */
async function serve(mode: Mode, format: LogFormat, options: { level?: LogLevel; traced?: boolean; config?: KConfig } = {}): Promise<Served> {
  const logs = capture(format, options.level ?? "debug");
  const app = new App({ port: 0, logger: logs.logger, ...options.config });
  const observed: Array<[string, string, number]> = [];
  const collector: MetricsCollector = { observeRequest: (method, route, status) => void observed.push([method, route, status]) };
  app.setMetricsCollector(collector);
  if (options.traced) app.setTracer(tracer);
  app.route(get("/fields", (ctx) => {
    const log = ctx.logger.child({ user_id: 42, admin: false, plan: "pro plan", note: "a=b", empty: "", nested: { cart: [1, 2] }, nothing: null });
    log.info("charging %d cents", 1250);
    log.child({ attempt: 2 }).warn("retrying");
    ctx.logger.debug("debug line");
    return {};
  }));
  app.route(get("/levels", (ctx) => {
    app.logger.debug("app debug");
    app.logger.info("app info");
    ctx.logger.debug("request debug");
    ctx.logger.info("request info");
    ctx.logger.warn("request warn");
    ctx.logger.error("request error");
    return {};
  }));
  app.route(get("/pay", (ctx) => {
    ctx.logger.error("payment failed: %s", "card declined");
    return { paid: false };
  }));
  app.route(get("/probe", { logLevel: "silent" }, (ctx) => {
    ctx.logger.error("probe logs an error");
    return { ok: true };
  }));
  app.route(get("/ready", (ctx) => {
    if (ctx.query.down !== undefined) throw new Error("not ready");
    ctx.logger.info("ready info");
    return { ok: true };
  }).logLevel("warn"));
  app.route(get("/debug-route", { logLevel: "debug" }, (ctx) => {
    ctx.logger.debug("route debug");
    return {};
  }));
  if (mode === "in-process") return { app, fetch: (path, init) => app.request(path, init), logs, observed };
  const server = await listenOn(app);
  servers.push(server);
  logs.clear();
  return { app, fetch: server.fetch, logs, observed };
}

describe("log levels", () => {
  it("defaults: debug in development, info in production; LOG_LEVEL when set; logLevel over both", () => {
    vi.stubEnv("LOG_LEVEL", "");
    expect(new Logger({ isProduction: false }).level).toBe("debug");
    expect(new Logger({ isProduction: true }).level).toBe("info");
    expect(new Logger({ isProduction: true }).debugEnabled).toBe(false);
    vi.stubEnv("LOG_LEVEL", "warn");
    expect(new Logger({ isProduction: false }).level).toBe("warn");
    expect(new App().logger.level).toBe("warn");
    expect(new App({ logLevel: "error" }).logger.level).toBe("error");
    expect(new App({ env: "production", logLevel: "debug" }).logger.debugEnabled).toBe(true);
  });

  it("refuses a bad level with the name of the option or variable it came from", () => {
    expect(() => new App({ logLevel: "verbose" as never })).toThrow('logLevel must be "debug", "info", "warn" or "error", got "verbose"');
    expect(() => new App({ logLevel: "silent" as never })).toThrow('logLevel must be "debug", "info", "warn" or "error", got "silent"');
    expect(() => new Logger({ isProduction: false, level: "INFO" as never })).toThrow('level must be "debug", "info", "warn" or "error", got "INFO"');
    expect(() => new Logger({ isProduction: false, format: "xml" as never })).toThrow('format must be "text" or "json", got "xml"');
    vi.stubEnv("LOG_LEVEL", "trace");
    expect(() => new App()).toThrow('LOG_LEVEL must be "debug", "info", "warn" or "error", got "trace"');
    expect(() => get("/x", { logLevel: "loud" as never }, () => ({}))).toThrow('logLevel of GET /x must be "debug", "info", "warn", "error" or "silent", got "loud"');
    expect(() => get("/x", () => ({})).logLevel("quiet" as never)).toThrow('logLevel of GET /x must be "debug", "info", "warn", "error" or "silent", got "quiet"');
  });

  it("refuses logLevel together with a logger of one's own (that logger has its own level)", () => {
    expect(() => new App({ logger: captureLogs().logger, logLevel: "warn" })).toThrow('logLevel ("warn") cannot be combined with logger');
  });

  it("withWriter keeps the level; the App logger's warn and info stop below it, error() still exits", () => {
    expect(new Logger({ isProduction: false, level: "error", output: { write: () => {} } }).withWriter({ write: () => {} }).level).toBe("error");
    const chunks: string[] = [];
    const logger = new Logger({ isProduction: false, level: "warn", output: { write: (chunk: string) => void chunks.push(chunk) } });
    logger.debug("d");
    logger.info("i");
    logger.warn("w");
    logger.logError("e");
    logger.flush();
    expect(chunks.join("").trimEnd().split("\n").map((line) => line.split(" ")[0])).toEqual(["[WARN]", "[ERROR]"]);
    const exit = vi.spyOn(process, "exit").mockImplementation((() => undefined) as never);
    logger.error("fatal");
    expect(exit).toHaveBeenCalledWith(1);
  });
});

for (const mode of MODES) {
  describe(`ctx.logger [${mode}]`, () => {
    it("text: request_id, then trace_id, then the fields as key=value, quoted when they need it", async () => {
      const { fetch, logs } = await serve(mode, "text", { traced: true });
      const res = await fetch("/fields", { headers: { "x-request-id": "req-1" } });
      expect(res.status).toBe(200);
      const fields = String.raw`request_id=req-1 trace_id=${TRACE_ID} user_id=42 admin=false plan="pro plan" note="a=b" empty="" nested="{\"cart\":[1,2]}" nothing=null`;
      expect(logs.lines()).toEqual([
        expect.stringMatching(new RegExp(String.raw`^\[INFO\] \S+ \S+ charging 1250 cents ${escape(fields)}$`)),
        expect.stringMatching(new RegExp(String.raw`^\[WARN\] \S+ \S+ retrying ${escape(fields)} attempt=2$`)),
        expect.stringMatching(new RegExp(String.raw`^\[DEBUG\] \S+ \S+ debug line request_id=req-1 trace_id=${TRACE_ID}$`)),
        expect.stringMatching(new RegExp(String.raw`^\[INFO\] \S+ \S+ GET /fields 200 \S+ request_id=req-1 trace_id=${TRACE_ID}$`)),
      ]);
    });

    it("JSON: request_id, trace_id and the fields as typed members, nested objects as JSON", async () => {
      const { fetch, logs } = await serve(mode, "json", { traced: true });
      await fetch("/fields", { headers: { "x-request-id": "req-2" } });
      const fields = { request_id: "req-2", trace_id: TRACE_ID, user_id: 42, admin: false, plan: "pro plan", note: "a=b", empty: "", nested: { cart: [1, 2] }, nothing: null };
      const [info, warn, debug, requestLine] = logs.entries();
      expect(info).toEqual({ level: "info", time: expect.any(String), message: "charging 1250 cents", ...fields });
      expect(warn).toEqual({ level: "warn", time: expect.any(String), message: "retrying", ...fields, attempt: 2 });
      expect(debug).toEqual({ level: "debug", time: expect.any(String), message: "debug line", request_id: "req-2", trace_id: TRACE_ID });
      expect(requestLine).toMatchObject({ path: "/fields", request_id: "req-2", trace_id: TRACE_ID });
    });

    it("error() writes an error line and returns: the response goes out, the process goes on", async () => {
      const exit = vi.spyOn(process, "exit").mockImplementation((() => undefined) as never);
      const { fetch, logs } = await serve(mode, "json");
      const res = await fetch("/pay", { headers: { "x-request-id": "pay-1" } });
      expect([res.status, await res.json()]).toEqual([200, { paid: false }]);
      expect(logs.entries()).toEqual([
        expect.objectContaining({ level: "error", message: "payment failed: card declined", request_id: "pay-1" }),
        expect.objectContaining({ level: "info", path: "/pay", status: 200, request_id: "pay-1" }),
      ]);
      expect((await fetch("/pay")).status).toBe(200);
      expect(exit).not.toHaveBeenCalled();
    });

    it("the threshold drops lower lines of the App logger, ctx.logger and the request line", async () => {
      const { fetch, logs } = await serve(mode, "text", { level: "warn" });
      expect((await fetch("/levels")).status).toBe(200);
      expect(logs.lines().map((line) => line.replace(/^(\S+) \S+ \S+ /, "$1 "))).toEqual([
        expect.stringMatching(/^\[WARN\] request warn request_id=/),
        expect.stringMatching(/^\[ERROR\] request error request_id=/),
      ]);
      logs.clear();
      expect((await fetch("/nowhere")).status).toBe(404);
      expect(logs.lines()).toEqual([expect.stringMatching(/^\[WARN\] \S+ \S+ GET \/nowhere 404 /)]);
    });

    it("KConfig logLevel sets the threshold of the App's own logger", async () => {
      const app = new App({ logLevel: "error", env: "production" });
      expect([app.logger.level, app.logger.format]).toEqual(["error", "json"]);
      const debugApp = new App({ logLevel: "debug", env: "production" });
      expect(debugApp.logger.debugEnabled).toBe(true);
    });

    it("a route at silent writes nothing, not even its error lines, and is still counted in metrics", async () => {
      const { fetch, logs, observed } = await serve(mode, "json");
      const res = await fetch("/probe");
      expect(res.status).toBe(200);
      expect(res.headers.get("x-request-id")).not.toBeNull();
      expect(logs.lines()).toEqual([]);
      expect(observed).toEqual([["GET", "/probe", 200]]);
    });

    it("a route at warn: its 200s and info lines are left out, its 5xx and error line are written", async () => {
      const { fetch, logs, observed } = await serve(mode, "text");
      expect((await fetch("/ready")).status).toBe(200);
      expect(logs.lines()).toEqual([]);
      expect((await fetch("/ready?down=1", { headers: { "x-request-id": "probe-9" } })).status).toBe(500);
      expect(logs.lines()).toEqual([
        expect.stringMatching(/^\[ERROR\] \S+ \S+ GET \/ready failed: Error: not ready\\n.* request_id=probe-9$/),
        expect.stringMatching(/^\[ERROR\] \S+ \S+ GET \/ready 500 \S+ request_id=probe-9$/),
      ]);
      expect(observed).toEqual([["GET", "/ready", 200], ["GET", "/ready", 500]]);
    });

    it("a route at debug shows its debug lines when the App is at info", async () => {
      const { fetch, logs } = await serve(mode, "text", { level: "info" });
      await fetch("/debug-route");
      await fetch("/fields");
      const lines = logs.lines().join("\n");
      expect(lines).toContain("route debug");
      expect(lines).not.toContain("debug line");
    });
  });
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
