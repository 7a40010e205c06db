/**
 * The JSON request line is assembled from cached parts (head per level and millisecond, method
 * and status members): each part must still say what the request was, in the same millisecond too.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { isoTime } from "../src/logging/format.js";
import { setLogOrigin } from "../src/logging/origin.js";
import { captureLogs } from "./helpers/logs.js";

const NOW = Date.UTC(2026, 10, 23, 15, 0, 0, 123);

afterEach(() => {
  vi.restoreAllMocks();
});

describe("JSON request lines from cached parts", () => {
  it("gives each line of one millisecond its own level, method, path, status and ids", () => {
    vi.spyOn(Date, "now").mockReturnValue(NOW);
    const { logger, entries } = captureLogs("json");
    logger.request({ method: "GET", path: "/a", status: 200, durationMs: 1 });
    logger.request({ method: "POST", path: "/b", status: 404, durationMs: 2, traceId: "t1" });
    logger.request({ method: "GET", path: "/c", status: 500, durationMs: 3, requestId: "r1", traceId: "t2" });
    logger.request({ method: "BREW", path: "/d", status: 200, durationMs: 4 });
    logger.request({ method: "GET", path: "/e", status: 1234, durationMs: 5 });
    logger.request({ method: "GET", path: "/f", status: Number.NaN, durationMs: 6 });
    const time = new Date(NOW).toISOString();
    expect(entries()).toEqual([
      { level: "info", time, method: "GET", path: "/a", status: 200, duration: "1.00ms" },
      { level: "warn", time, method: "POST", path: "/b", status: 404, duration: "2.00ms", trace_id: "t1" },
      { level: "error", time, method: "GET", path: "/c", status: 500, duration: "3.00ms", request_id: "r1", trace_id: "t2" },
      { level: "info", time, method: "BREW", path: "/d", status: 200, duration: "4.00ms" },
      { level: "error", time, method: "GET", path: "/e", status: 1234, duration: "5.00ms" },
      { level: "info", time, method: "GET", path: "/f", status: 0, duration: "6.00ms" },
    ]);
  });

  it("takes a new time each millisecond and a new origin at once, even within a millisecond", () => {
    const now = vi.spyOn(Date, "now").mockReturnValue(NOW);
    const { logger, entries } = captureLogs("json");
    logger.request({ method: "GET", path: "/a", status: 200, durationMs: 1 });
    now.mockReturnValue(NOW + 1);
    logger.request({ method: "GET", path: "/a", status: 200, durationMs: 1 });
    setLogOrigin("3", 4242);
    logger.request({ method: "GET", path: "/a", status: 200, durationMs: 1 });
    const [first, second, third] = entries();
    expect(first).toMatchObject({ time: new Date(NOW).toISOString() });
    expect(second).toMatchObject({ time: new Date(NOW + 1).toISOString() });
    expect(second).not.toHaveProperty("worker");
    expect(third).toMatchObject({ time: new Date(NOW + 1).toISOString(), worker: "3", pid: 4242, path: "/a" });
  });
});

describe("isoTime", () => {
  it("is Date#toISOString() for every millisecond, second boundaries and years outside 0000-9999 included", () => {
    const samples = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, -1, -999, -1000, -1001, NOW, NOW + 877, 1.5, 253402300799999, 253402300800000, -62167219200001];
    for (let t = NOW - 1500; t < NOW + 1500; t += 7) samples.push(t);
    for (const t of samples) expect(isoTime(t), String(t)).toBe(new Date(t).toISOString());
  });
});
