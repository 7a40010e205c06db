// Every numeric and enumerated option is checked when its object is made (issue 23, defect 5): one
// table per options object, each bad value refused with the option's name and the value, each good
// value still accepted. NaN (what `Number(undefined)` gives), Infinity, negatives, fractions where
// whole numbers are meant, unknown enum values, and the relations between options.
import { afterEach, describe, expect, it } from "vitest";
import { parseStart } from "../cli/args.js";
import { resolveOptions, type SupervisorOptions } from "../supervisor/options.js";
import { App, Logger, defineJob, envNumber, rateLimit, type KConfig, type RateLimitOptions } from "../src/index.js";
import type { LoggerOptions } from "../src/logging/logger.js";
import { createPrometheus, type PrometheusOptions } from "../src/entries/metrics.js";
import { createSQLHealthChecker, openPostgres, openSQLite, type PostgresOptions, type SQLiteOptions } from "../src/entries/sql.js";
import { captureLogs } from "./helpers/logs.js";

/** [option name as the message spells it, the options, the value shown in the message]. */
type Case<T> = [name: string, options: T, shown: string];

const show = (value: unknown) => (typeof value === "string" ? JSON.stringify(value) : String(value));
const escape = (text: string) => text.replaceAll(/[.*+?^${}()|[\]\\]/g, String.raw`\$&`);

/** `name: [bad values]` → one case per value, the option at `path` (dotted) set to it. */
function cases<T extends object>(table: Record<string, unknown[]>): Case<T>[] {
  return Object.entries(table).flatMap(([path, values]) => values.map((value): Case<T> => {
    const [head, tail] = path.split(".") as [string, string | undefined];
    const options = (tail === undefined ? { [head]: value } : { [head]: { [tail]: value } }) as T;
    return [path, options, show(value)];
  }));
}

function expectRefused(make: () => unknown, name: string, shown: string): void {
  let message = "(nothing thrown)";
  try {
    make();
  } catch (error) {
    message = (error as Error).message;
  }
  expect(message).toMatch(new RegExp(`(^|\\W)${escape(name)} must be .*got ${escape(shown)}$`));
}

const resolve = (options: Partial<SupervisorOptions>) => resolveOptions({ entry: "app.js", controlSocket: false, metricsPort: false, logger: captureLogs().logger, ...options });
const start = (args: string[], vars: Record<string, string> = {}) => parseStart(["package.json", ...args], { PATH: process.env.PATH, ...vars });
const error = (result: ReturnType<typeof parseStart>) => (result.command === "error" ? result.message : `(no error: ${result.command})`);
const limiter = (options: Partial<RateLimitOptions>) => rateLimit({ limit: 10, windowMs: 1000, ...options } as RateLimitOptions);
const job = (options: object) => defineJob({ name: "job", run: () => {}, every: 60_000, ...options } as Parameters<typeof defineJob>[0]);
const prometheus = (options: PrometheusOptions) => createPrometheus({ defaultMetrics: false, ...options });

const NUMBERS_BAD_AS_MS = [Number.NaN, -1, Number.POSITIVE_INFINITY, 3_000_000_000];

describe("KConfig: new App()", () => {
  const logger = captureLogs().logger;
  const app = (config: KConfig) => new App({ logger, ...config });
  const bad = cases<KConfig>({
    port: [-1, 65_536, 1.5, Number.NaN, "3000"],
    host: ["", "http://localhost", "127.0.0.1:3000", "my host", 127],
    env: ["prod", ""],
    bodyLimit: [Number.NaN, -1, 1.5, Number.POSITIVE_INFINITY],
    healthTimeout: [0, ...NUMBERS_BAD_AS_MS],
    shutdownTimeout: [0, ...NUMBERS_BAD_AS_MS],
    shutdownDelay: NUMBERS_BAD_AS_MS,
    "cors.maxAge": [-1, Number.NaN, 1.5],
    "loadShedding.maxEventLoopDelay": [0, ...NUMBERS_BAD_AS_MS],
    "loadShedding.maxQueueDelay": [0, ...NUMBERS_BAD_AS_MS],
    "loadShedding.maxEventLoopUtilization": [0, 1.5, Number.NaN],
    "loadShedding.maxInflight": [0, 1.5, Number.NaN, Number.POSITIVE_INFINITY],
    "loadShedding.retryAfter": [-1, 1.5, Number.NaN],
    "loadShedding.sampleInterval": [0, ...NUMBERS_BAD_AS_MS],
  });
  it.each(bad)("refuses %s in %o", (name, config, shown) => expectRefused(() => app(config), name, shown));

  it("takes HOST over host, as PORT over port, for the App that reads PORT; one with its own portEnv keeps its host", () => {
    const saved = process.env.HOST;
    process.env.HOST = " 127.0.0.1 ";
    try {
      expect(app({ host: "::" }).config.host).toBe("127.0.0.1");
      expect(app({ host: "::1", portEnv: "ADMIN_PORT" }).config.host).toBe("::1");
      expect(app({ portEnv: false }).config.host).toBeUndefined();
      process.env.HOST = "0.0.0.0/0";
      expectRefused(() => app({}), "HOST", '"0.0.0.0/0"');
    } finally {
      if (saved === undefined) delete process.env.HOST;
      else process.env.HOST = saved;
    }
  });

  it("refuses a shutdownDelay that leaves no budget: it must be below shutdownTimeout", () => {
    expect(() => app({ shutdownDelay: 10_000 })).toThrow("shutdownDelay (10000ms) must be less than shutdownTimeout (10000ms)");
    expect(() => app({ shutdownDelay: 3000, shutdownTimeout: 2000 })).toThrow("shutdownDelay (3000ms) must be less than shutdownTimeout (2000ms)");
  });

  it("accepts good values", () => {
    const good: KConfig[] = [
      { port: 0 }, { port: 65_535 }, { env: "production" }, { env: "staging" }, { bodyLimit: 0 }, { bodyLimit: 10 * 1024 * 1024 },
      { healthTimeout: 1 }, { shutdownTimeout: 1 }, { shutdownTimeout: 30_000, shutdownDelay: 5000 }, { cors: { maxAge: 0 } },
      { loadShedding: { maxEventLoopDelay: 200, maxQueueDelay: 50, maxEventLoopUtilization: 1, maxInflight: 100, retryAfter: 0, sampleInterval: 10 } },
    ];
    for (const config of good) void app(config).close();
  });
});

describe("KConfig from the environment", () => {
  const saved = process.env.PORT;
  afterEach(() => {
    if (saved === undefined) delete process.env.PORT;
    else process.env.PORT = saved;
  });
  it.each(["abc", "-1", "65536", "80.5", "0x50"])("refuses PORT=%s with the variable's name", (value) => {
    process.env.PORT = value;
    expectRefused(() => new App({ logger: captureLogs().logger }), "PORT", JSON.stringify(value));
  });
  it("reads a good PORT", () => {
    process.env.PORT = "8081";
    expect(new App({ logger: captureLogs().logger }).config.port).toBe(8081);
  });
});

describe("envNumber", () => {
  const env = { A: "12", B: "ten", C: "", D: "1e3", E: "-4", F: "2.5", G: "NaN", H: "Infinity", I: " 7 " };
  it("reads plain decimals and refuses the rest with the variable's name", () => {
    expect(envNumber("A", {}, env)).toBe(12);
    expect(envNumber("C", {}, env)).toBeUndefined();
    expect(envNumber("MISSING", {}, env)).toBeUndefined();
    expect(envNumber("I", { integer: true }, env)).toBe(7);
    expect(envNumber("F", {}, env)).toBe(2.5);
    for (const name of ["B", "D", "G", "H"]) expectRefused(() => envNumber(name, {}, env), name, JSON.stringify(env[name as keyof typeof env]));
    expectRefused(() => envNumber("E", { min: 0 }, env), "E", '"-4"');
    expectRefused(() => envNumber("F", { integer: true }, env), "F", '"2.5"');
    expect(() => envNumber("A", { integer: true, above: 12 }, env)).toThrow('A must be an integer above 12, got "12"');
  });
});

describe("SupervisorOptions: resolveOptions()", () => {
  const bad = cases<Partial<SupervisorOptions>>({
    workers: [0, 1.5, Number.NaN, Number.POSITIVE_INFINITY],
    port: [-1, 70_000, 1.5, Number.NaN],
    readyTimeout: [0, ...NUMBERS_BAD_AS_MS],
    shutdownTimeout: NUMBERS_BAD_AS_MS,
    killMargin: NUMBERS_BAD_AS_MS,
    heartbeatInterval: [0, 1.5, Number.NaN, 3_000_000_000],
    watchdogTimeout: NUMBERS_BAD_AS_MS,
    "backoff.initial": NUMBERS_BAD_AS_MS,
    "backoff.max": NUMBERS_BAD_AS_MS,
    "backoff.resetAfter": NUMBERS_BAD_AS_MS,
    "crashLoop.maxCrashes": [0, 1.5, Number.NaN],
    "crashLoop.window": [0, ...NUMBERS_BAD_AS_MS],
    metricsPort: [-1, 70_000, 1.5, Number.NaN],
    host: ["", "http://localhost", "::1 ", 127],
    metricsHost: ["0.0.0.0:9464", "a/b"],
    maxMemory: [0, -1, Number.NaN, Number.POSITIVE_INFINITY],
    maxMemoryWindow: NUMBERS_BAD_AS_MS,
  });
  it.each(bad)("refuses %s in %o", (name, options, shown) => expectRefused(() => resolve(options), name, shown));

  it("refuses options that contradict each other", () => {
    expect(() => resolve({ heartbeatInterval: 1000, watchdogTimeout: 1000 })).toThrow("watchdogTimeout (1000ms) must exceed heartbeatInterval (1000ms)");
    expect(() => resolve({ backoff: { initial: 5000, max: 1000 } })).toThrow("backoff.initial (5000ms) must not exceed backoff.max (1000ms)");
  });

  it("accepts good values", () => {
    const good: Partial<SupervisorOptions>[] = [
      { workers: 1 }, { port: 0 }, { readyTimeout: 1 }, { shutdownTimeout: 0 }, { killMargin: 0 }, { heartbeatInterval: 1 },
      { watchdogTimeout: 0 }, { backoff: { initial: 0, max: 0, resetAfter: 0 } }, { crashLoop: { maxCrashes: 1, window: 1 } },
      { metricsPort: 0 }, { host: "127.0.0.1" }, { host: "::" }, { host: "localhost" }, { metricsHost: "fe80::1%eth0" }, { maxMemory: 1 }, { maxMemory: "512M" }, { maxMemoryWindow: 0 },
    ];
    for (const options of good) expect(() => resolve(options)).not.toThrow();
  });
});

describe("the supervisor's environment and the CLI's flags", () => {

  it.each([["WORKERS", "two"], ["WORKERS", "0"], ["WEB_CONCURRENCY", "1.5"], ["PORT", "http"], ["PORT", "70000"], ["KEELSON_METRICS_PORT", "abc"], ["HOST", "http://0.0.0.0"], ["KEELSON_METRICS_HOST", "::1/128"]])(
    "refuses %s=%s with the variable's name",
    (name, value) => expect(error(start([], { [name]: value }))).toMatch(new RegExp(`^${name} must be .*got "${escape(value)}"$`)),
  );

  it.each([["--workers", "x"], ["--ready-timeout", "NaN"], ["--kill-margin", "-5"], ["--backoff-max", "Infinity"], ["--metrics-port", "99999"], ["--host", "0.0.0.0:3000"], ["--metrics-host", "a b"]])(
    "refuses %s %s with the flag's name",
    (flag, value) => expect(error(start([`${flag}=${value}`]))).toMatch(new RegExp(`^${flag} .*"${escape(value)}"$`)),
  );

  it.each([["--workers", "2.5"], ["--workers", "0"], ["--port", "1.5"], ["--ready-timeout", "0"], ["--heartbeat-interval", "0.5"], ["--max-crashes", "0"], ["--crash-window", "0"], ["--shutdown-timeout", "3000000000"]])(
    "refuses %s %s by each flag's own rule, with the flag's name",
    (flag, value) => expect(error(start([`${flag}=${value}`]))).toMatch(new RegExp(`^${flag} must be .*got "${escape(value)}"$`)),
  );

  it("accepts good flags and variables", () => {
    const result = start(["--workers", "2", "--ready-timeout", "5000", "--metrics-port", "off"], { PORT: "8080", KEELSON_METRICS_PORT: "9100" });
    expect(result.command).toBe("start");
  });
});

describe("RateLimitOptions: rateLimit()", () => {
  const bad = cases<Partial<RateLimitOptions>>({
    limit: [0, 1.5, Number.NaN, Number.POSITIVE_INFINITY],
    windowMs: [0, 1.5, Number.NaN, Number.POSITIVE_INFINITY],
    batch: [0, 1.5, Number.NaN],
    storeTimeoutMs: [0, Number.NaN, 3_000_000_000],
    trustedProxies: [-1, 1.5, Number.NaN],
    ipv6Subnet: [31, 129, 56.5, Number.NaN],
    algorithm: ["token-bucket"],
    onStoreError: ["deny"],
  });
  it.each(bad)("refuses %s in %o", (name, options, shown) => expectRefused(() => limiter(options), name, shown));
  it("accepts good values", () => {
    for (const options of [{ batch: 1 }, { storeTimeoutMs: 1 }, { trustedProxies: 2 }, { ipv6Subnet: 64 }, { ipv6Subnet: false }, { algorithm: "sliding" }, { onStoreError: "reject" }] as const) {
      expect(() => limiter(options)).not.toThrow();
    }
  });
});

describe("JobOptions: defineJob()", () => {
  it.each(cases<object>({ every: [999, 1500.5, Number.NaN, Number.POSITIVE_INFINITY, 1e300], runOn: ["all"] }))(
    "refuses %s in %o", (name, options, shown) => expectRefused(() => job(options), name, shown),
  );
  it("accepts good values", () => {
    expect(() => job({ every: 1000 })).not.toThrow();
    expect(() => job({ every: undefined, cron: "* * * * *", runOn: "each" })).not.toThrow();
  });
});

describe("PrometheusOptions: createPrometheus()", () => {
  it.each(cases<PrometheusOptions>({ clusterTimeoutMs: [0, ...NUMBERS_BAD_AS_MS], port: [-1, 70_000, 1.5, Number.NaN] }))(
    "refuses %s in %o", (name, options, shown) => expectRefused(() => prometheus(options), name, shown),
  );
  it("refuses buckets that are not increasing finite numbers", () => {
    expect(() => prometheus({ buckets: [0.1, Number.NaN] })).toThrow("buckets must be finite numbers in increasing order, got [0.1,NaN]");
    expect(() => prometheus({ buckets: [1, 0.5] })).toThrow("buckets must be finite numbers in increasing order, got [1,0.5]");
  });
  it("accepts good values", () => {
    expect(() => prometheus({ clusterTimeoutMs: 1, port: 0, buckets: [0.01, 0.1, 1] })).not.toThrow();
  });
});

describe("SQL options", () => {
  it.each(cases<Partial<SQLiteOptions>>({ busyTimeoutMs: [-1, 1.5, ...NUMBERS_BAD_AS_MS] }))(
    "openSQLite refuses %s in %o", (name, options, shown) => expectRefused(() => openSQLite({ file: ":memory:", ...options }), name, shown),
  );
  it.each(cases<Partial<PostgresOptions>>({ max: [0, 1.5, Number.NaN, Number.POSITIVE_INFINITY], connectTimeoutSeconds: [0, -1, Number.NaN, Number.POSITIVE_INFINITY] }))(
    "openPostgres refuses %s in %o", (name, options, shown) => expectRefused(() => openPostgres({ url: "postgres://localhost/x", ...options }), name, shown),
  );
  it.each(cases<object>({ timeoutMs: [0, ...NUMBERS_BAD_AS_MS] }))(
    "createSQLHealthChecker refuses %s in %o", (name, options, shown) => expectRefused(() => createSQLHealthChecker(openSQLite({ file: ":memory:" }), options), name, shown),
  );
  it("accepts good values", async () => {
    const db = openSQLite({ file: ":memory:", busyTimeoutMs: 0 });
    expect(createSQLHealthChecker(db, { timeoutMs: 1 }).name).toBe("database");
    await db.close();
    await openPostgres({ url: "postgres://localhost/x", max: 1, connectTimeoutSeconds: 0.5 }).close();
  });
});

describe("LoggerOptions: new Logger()", () => {
  it("refuses an unknown format and accepts the two", () => {
    expectRefused(() => new Logger({ isProduction: false, format: "yaml" } as unknown as LoggerOptions), "format", '"yaml"');
    for (const format of ["text", "json"] as const) expect(new Logger({ isProduction: false, format, output: { write: () => {} } }).format).toBe(format);
  });
});
