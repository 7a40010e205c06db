/**
 * Log lines cannot be forged or carry terminal escapes: every control character in every field
 * of a text or JSON line is escaped, and a 5xx error line never carries the request's query
 * values. The loggers here write to a real file descriptor, as they do to stdout.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { App, get, internal } from "../src/index.js";
import { escapeText, jsonString } from "../src/logging/format.js";
import { redactQuery } from "../src/logging/redact-query.js";
import { Logger, type LogFormat } from "../src/logging/logger.js";

// C0, DEL, C1, and the Unicode line and paragraph separators.
// oxlint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROLS = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/u;
const HOSTILE = "a\x1b[31mred\x1b[0m\u0000nul\u0007bel\x7fdel\x9bcsi\x85nel\u2028ls\u2029ps\ttab\r\nINFO forged";

const dir = mkdtempSync(join(tmpdir(), "keelson-log-escape-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A logger on a real file descriptor, and the file's text after a flush. */
function fileLogger(format: LogFormat): { logger: Logger; read(): string } {
  const path = join(dir, `log-${files++}.txt`);
  const fd = openSync(path, "w");
  const logger = new Logger({ isProduction: format === "json", format, output: fd });
  return {
    logger,
    read() {
      logger.flush();
      closeSync(fd);
      return readFileSync(path, "utf8");
    },
  };
}

describe("escapeText", () => {
  it.each([
    ["\x1b[2J", "\\x1b[2J"],
    ["\u0000", "\\x00"],
    ["\x7f", "\\x7f"],
    ["\x9b", "\\x9b"],
    ["\u2028|\u2029", "\\u2028|\\u2029"],
    ["a\r\nb\tc", "a\\r\\nb\\tc"],
  ])("%j → %s", (raw, escaped) => {
    expect(escapeText(raw)).toBe(escaped);
  });

  it("returns the very same string when there is nothing to escape", () => {
    const plain = "GET /books/42 é 😀";
    expect(escapeText(plain)).toBe(plain);
  });
});

describe("jsonString", () => {
  it.each(["\x7f", "\x85", "\x9b", "\u2028", "\u2029", HOSTILE])("escapes %j and parses back to it", (raw) => {
    const literal = jsonString(raw);
    expect(literal).not.toMatch(CONTROLS);
    expect(JSON.parse(literal)).toBe(raw);
  });
});

describe("text lines on a real file descriptor", () => {
  it("escape every control character of a logger argument, on one line", () => {
    const log = fileLogger("text");
    log.logger.info("user said %s", HOSTILE);
    log.logger.warn(HOSTILE);
    const lines = log.read().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[2]).toBe("");
    for (const line of lines.slice(0, 2)) {
      expect(line).not.toMatch(CONTROLS);
      expect(line).toContain("a\\x1b[31mred\\x1b[0m\\x00nul\\x07bel\\x7fdel\\x9bcsi\\x85nel\\u2028ls\\u2029ps\\ttab\\r\\nINFO forged");
    }
  });

  it("escape every control character of a request line's method and path", () => {
    const log = fileLogger("text");
    log.logger.request({ method: "G\x1bET", path: `/p${HOSTILE}`, status: 200, durationMs: 1 });
    const text = log.read();
    expect(text.split("\n")).toHaveLength(2);
    expect(text.slice(0, -1)).not.toMatch(CONTROLS);
    expect(text).toContain("G\\x1bET /pa\\x1b[31m");
  });
});

describe("JSON lines on a real file descriptor", () => {
  it("escape DEL, C1 and U+2028/U+2029 too, in messages and request fields", () => {
    const log = fileLogger("json");
    log.logger.info("%s", HOSTILE);
    log.logger.request({ method: "GET", path: `/p${HOSTILE}`, status: 500, durationMs: 1, requestId: HOSTILE });
    const lines = log.read().split("\n").slice(0, -1);
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).not.toMatch(CONTROLS);
    expect((JSON.parse(lines[0]!) as { message: string }).message).toBe(HOSTILE);
    expect(JSON.parse(lines[1]!)).toMatchObject({ path: `/p${HOSTILE}`, request_id: HOSTILE });
  });
});

const SECRET = "s3cr%C3%A9t+t0ken";
const DECODED = "s3crét t0ken";

/** An App whose routes throw errors that quote their query values, logging to a real file. */
function buildFailingApp(format: LogFormat) {
  const log = fileLogger(format);
  const app = new App({ logger: log.logger, cors: false });
  app.route(get("/fail", (ctx) => {
    throw new Error(`no account for token ${String(ctx.query.token)} (raw ${ctx.event.url.search})\x1b[2J\u2028forged`);
  }));
  app.route(get("/wrapped", (ctx) => {
    throw internal("lookup failed", new Error(`id ${String(ctx.query.id)} not in ${String(ctx.query.table)}`));
  }));
  return { app, log };
}

describe("the 5xx error line", () => {
  it.each(["text", "json"] as const)("carries neither the query string nor its values, decoded or not (%s)", async (format) => {
    const { app, log } = buildFailingApp(format);
    const res = await app.request(`/fail?token=${SECRET}&x=1`);
    expect(res.status).toBe(500);
    const text = log.read();
    const errorLine = text.split("\n").find((line) => line.includes("failed"));
    expect(errorLine).toBeDefined();
    for (const leak of [SECRET, DECODED, "s3cr%C3%A9t", "s3crét", "token="]) expect(errorLine).not.toContain(leak);
    expect(errorLine).toContain("no account for token [query] (raw ?[query])");
    const lines = text.slice(0, -1).split("\n");
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(line).not.toMatch(CONTROLS);
  });

  it("removes short values where they stand alone in the message, and the cause's message is covered", async () => {
    const { app, log } = buildFailingApp("text");
    expect((await app.request("/wrapped?id=42&table=users")).status).toBe(500);
    const errorLine = log.read().split("\n").find((line) => line.includes("failed"))!;
    expect(errorLine).toContain("GET /wrapped failed: Error: id [query] not in [query]");
    // From the request line on: the timestamp before it may itself contain "42" (16:42:56 failed CI once).
    const message = errorLine.slice(errorLine.indexOf("GET /wrapped"), errorLine.indexOf("\\n    at "));
    expect(message).toMatch(/^GET \/wrapped failed: /);
    expect(message).not.toMatch(/42|users/);
  });
});

describe("redactQuery", () => {
  const stack = "Error: row 7 of 17 missing for bob@example.com\n    at find (/srv/app/db.ts:7:17)\n    at run (/srv/app/main.ts:70:7)";

  it("replaces long values anywhere and short ones only standing alone in the message", () => {
    expect(redactQuery(stack, "?n=7&email=bob%40example.com")).toBe(
      "Error: row [query] of 17 missing for [query]\n    at find (/srv/app/db.ts:7:17)\n    at run (/srv/app/main.ts:70:7)",
    );
  });

  it("leaves text alone when there is no query, and ignores keys without values", () => {
    expect(redactQuery(stack, "")).toBe(stack);
    expect(redactQuery(stack, "?bob&=")).toBe(stack);
  });

  it("never matches its own placeholder again", () => {
    expect(redactQuery("x a-query-value y", "?a=a-query-value&b=query")).toBe("x [query] y");
  });
});
