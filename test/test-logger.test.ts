import { afterEach, describe, expect, it } from "vitest";
import { App, createTestLogger, get } from "../src/index.js";

const saved = process.env.LOG_LEVEL;
afterEach(() => {
  if (saved === undefined) delete process.env.LOG_LEVEL;
  else process.env.LOG_LEVEL = saved;
});

describe("createTestLogger()", () => {
  it("keeps the App's lines, request lines included, readable right after the call", async () => {
    const logger = createTestLogger();
    const app = new App({ serviceName: "svc", logger });
    app.route(get("/hello", (ctx) => {
      ctx.logger.info("greeting %s", "you");
      return { ok: true };
    }));
    expect((await app.request("/hello")).status).toBe(200);
    const lines = logger.lines();
    expect(lines).toContainEqual(expect.stringMatching(/^\[INFO\] .* greeting you request_id=/));
    expect(lines).toContainEqual(expect.stringMatching(/^\[INFO\] .* GET \/hello 200 /));
    expect(logger.output()).toBe(lines.map((line) => line + "\n").join(""));
  });

  it("keeps every level by default, whatever LOG_LEVEL says; `level` sets the threshold", () => {
    process.env.LOG_LEVEL = "error";
    const all = createTestLogger();
    all.debug("a debug line");
    expect(all.lines()).toEqual([expect.stringMatching(/^\[DEBUG\] .* a debug line$/)]);
    const warnings = createTestLogger({ level: "warn" });
    warnings.info("dropped");
    warnings.warn("kept");
    expect(warnings.lines()).toEqual([expect.stringMatching(/^\[WARN\] .* kept$/)]);
  });

  it("writes JSON lines with format json, and clear() starts over", () => {
    const logger = createTestLogger({ format: "json" });
    logger.info("one %d", 1);
    expect(logger.lines().map((line) => JSON.parse(line) as { level: string; message: string })).toEqual([expect.objectContaining({ level: "info", message: "one 1" })]);
    logger.clear();
    expect(logger.lines()).toEqual([]);
    logger.info("two");
    expect(logger.lines()).toEqual([expect.stringContaining('"message":"two"')]);
  });

  it("refuses a bad level or format with the option's name", () => {
    expect(() => createTestLogger({ level: "loud" as never })).toThrow(/^level must be/);
    expect(() => createTestLogger({ format: "xml" as never })).toThrow(/format/);
  });
});
