// Command-line flags and the fixed parts of the method (targets, scenarios).
import { parseArgs } from "node:util";
import type { Scenario } from "./types.js";

/** Round 1 runs in this order; later rounds reverse or shuffle it. */
export const ALL_TARGETS = [
  "node-http", "h3", "fastify", "fastify-logger", "hono", "keelson", "keelson-otel",
  // The peers at keelson's full-stack work (a JSON line per request, CORS, a Prometheus histogram, an
  // OpenTelemetry span, body validation), without and with the OpenTelemetry SDK.
  "fastify-full", "fastify-full-otel", "hono-full", "hono-full-otel",
];

/**
 * Variants measured only where asked for by name (`--targets`), never in the default peer
 * comparison: keelson with one more feature on, against the plain `keelson` target; and
 * `node-http-full`, raw node:http doing keelson's full-stack work by hand (the floor of that work).
 */
export const VARIANT_TARGETS: readonly string[] = ["node-http-full", "keelson-ratelimit", "keelson-schemas", "keelson-compress", "keelson-idempotency", "keelson-ablate"];

/** Targets whose bundled cold start `make bench` also measures: keelson's full stack and its baseline. */
export const BUNDLED_TARGETS: readonly string[] = ["h3", "keelson"];

export const SCENARIOS: Scenario[] = [
  { name: "GET /hello", method: "GET", path: "/hello" },
  { name: "GET /books/42", method: "GET", path: "/books/42" },
  { name: "POST /books", method: "POST", path: "/books", body: JSON.stringify({ title: "Dune", author: "Frank Herbert" }) },
];

/** The default warm-up per server start, seconds. */
const WARMUP_SEC = 8;

export interface Config {
  rounds: number;
  durationSec: number;
  warmupSec: number;
  targets: string[];
  connections: number;
  pipelining: number;
  coldStarts: number;
  seed: number;
  viaTsx: boolean;
  /** Sent as `Origin` on every request (browser traffic: CORS answers it); undefined sends none. */
  origin: string | undefined;
  /**
   * Side by side: every target started once and kept up, each round one window per scenario per
   * target back to back, so the windows a ratio divides lie seconds apart instead of minutes.
   */
  sideBySide: boolean;
}

/**
 * POST /books with a fresh `Idempotency-Key` per request (autocannon's `[<id>]`, replaced on each
 * request): run against every target when keelson-idempotency is one, so both sides send the same bytes.
 */
export const KEYED_POST: Scenario = { ...SCENARIOS[2]!, name: "POST /books keyed", headers: { "idempotency-key": "[<id>]" } };

/** Whether a request asks autocannon to put a fresh id where it says `[<id>]`. */
export const needsIds = (specs: readonly { headers?: Record<string, string> }[]): boolean =>
  specs.some((spec) => Object.values(spec.headers ?? {}).some((value) => value.includes("[<id>]")));

/**
 * The scenarios as sent: with the `Origin` header when the run asks for browser traffic, and
 * "POST /books keyed" for every target when keelson-idempotency is one of `targets`.
 */
export function scenariosFor(config: Pick<Config, "origin"> & { targets?: readonly string[] }): Scenario[] {
  const all = config.targets?.includes("keelson-idempotency") === true ? [...SCENARIOS, KEYED_POST] : SCENARIOS;
  return config.origin === undefined ? all : all.map((s) => ({ ...s, headers: { ...s.headers, origin: config.origin! } }));
}

/** The peers mode's flags, one line each (also printed by `bench.ts --help`). */
export const PEERS_OPTIONS = [
  "--rounds N         interleaved rounds (default 3, or ROUNDS: make bench ROUNDS=9)",
  "--duration S       measured seconds per scenario (default 3)",
  "--warmup S         discarded warm-up seconds per server start, all routes mixed (default 8)",
  `--targets a,b,...  subset of: ${ALL_TARGETS.join(",")} (default all); variants only when named: ${VARIANT_TARGETS.join(",")} (keelson-idempotency adds "POST /books keyed" for every target)`,
  "--connections N    autocannon connections (default 50)",
  "--pipelining N     autocannon pipelining factor (default 10)",
  "--cold-starts N    starts per target for the cold-start median (default 5)",
  "--seed N           seed of the round-3+ shuffles (default 42)",
  "--tsx              run server sources through tsx instead of transpiled JS",
  "--origin URL       send Origin: URL on every request (browser traffic, CORS active)",
  "--side-by-side     start every target once and keep them all up; each round measures one window per scenario per target back to back (or SIDE_BY_SIDE=1)",
];

export const USAGE = `Usage: node --import tsx load-tests/bench.ts [peers] [flags]

${[...PEERS_OPTIONS, "--help             this text"].map((line) => `  ${line}`).join("\n")}`;

function positive(name: string, raw: string | undefined, fallback: number, integer: boolean): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw new Error(`--${name} must be a positive ${integer ? "integer" : "number"}, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** An `--origin` value: a bare origin (scheme, host, port), as a browser sends it. */
export function checkOrigin(raw: string): string {
  const url = URL.canParse(raw) ? new URL(raw) : undefined;
  if (url === undefined || url.origin === "null" || url.origin !== raw) throw new Error(`--origin must be an origin such as https://app.example.com, got ${JSON.stringify(raw)}`);
  return raw;
}

export function parseConfig(argv: string[]): Config | null {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      rounds: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      targets: { type: "string" },
      connections: { type: "string" },
      pipelining: { type: "string" },
      "cold-starts": { type: "string" },
      seed: { type: "string" },
      tsx: { type: "boolean", default: false },
      origin: { type: "string" },
      "side-by-side": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) return null;
  const targets = values.targets === undefined ? ALL_TARGETS : values.targets.split(",").map((t) => t.trim()).filter(Boolean);
  const known = [...ALL_TARGETS, ...VARIANT_TARGETS];
  const unknown = targets.filter((t) => !known.includes(t));
  if (unknown.length > 0 || targets.length === 0) {
    throw new Error(`unknown target(s) ${unknown.join(", ") || "(none given)"}; known: ${known.join(", ")}`);
  }
  return {
    rounds: positive("rounds", values.rounds ?? (process.env.ROUNDS || undefined), 3, true),
    durationSec: positive("duration", values.duration, 3, false),
    // Long enough for the POST path's first optimised compilation to land before the measured
    // windows: a shorter warm-up measures the compiler in keelson's row and not in the lighter peers'.
    warmupSec: positive("warmup", values.warmup, WARMUP_SEC, false),
    targets: [...new Set(targets)],
    connections: positive("connections", values.connections, 50, true),
    pipelining: positive("pipelining", values.pipelining, 10, true),
    coldStarts: positive("cold-starts", values["cold-starts"], 5, true),
    seed: positive("seed", values.seed, 42, true),
    viaTsx: values.tsx,
    origin: values.origin === undefined ? undefined : checkOrigin(values.origin),
    sideBySide: values["side-by-side"] || process.env.SIDE_BY_SIDE === "1",
  };
}

/** Rough wall-time forecast, printed up front so nobody is surprised by a long run. */
export function estimateSec(config: Config): number {
  const windows = scenariosFor(config).length * (config.durationSec + 0.2);
  const bundledTargets = config.viaTsx ? 0 : config.targets.filter((t) => BUNDLED_TARGETS.includes(t)).length;
  const bundled = bundledTargets * (config.coldStarts * (0.4 + 1.8) + 1) + 2;
  const coldStarts = config.targets.length * config.coldStarts * 0.4;
  // Side by side, a target starts and warms up once; the rounds add windows and a count of its work.
  const perTarget = config.sideBySide
    ? 0.5 + 1.2 + config.warmupSec + config.rounds * (windows + 0.5)
    : config.rounds * (0.5 + 1.2 + config.warmupSec + windows);
  return config.targets.length * perTarget + coldStarts + bundled;
}
