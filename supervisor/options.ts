import { availableParallelism } from "node:os";
import { DEFAULT_PORT, MAX_TIMER_MS, PORT_RULE, checkHost, checkNumber, readPortEnv } from "../src/checks.js";
import { resolveFeatureOptions, type FeatureOptions, type ResolvedFeatureOptions } from "./feature-settings.js";
import { newLogger, type Logger } from "../src/logging/logger.js";
import { defaultControlSocket, effectivePort } from "./control-path.js";
import type { BackoffOptions, CrashLoopOptions } from "./backoff.js";
import { parseSize } from "./size.js";
import { resolveBalancer, systemHost, type Balancer, type BalancerHost } from "./balancer.js";

export type { BackoffOptions, CrashLoopOptions } from "./backoff.js";

/** Settings of a Supervisor. Times are in milliseconds. The cluster features add theirs (`metricsPort`, `metricsHost`). */
export interface SupervisorOptions extends FeatureOptions {
  /** The module each worker runs: it builds an App and calls `listen()`. A path (relative to the cwd) or a file URL. */
  entry: string;
  /** Number of workers. Default: `WORKERS`, else `WEB_CONCURRENCY`, else `os.availableParallelism()`. */
  workers?: number;
  /** Sets `PORT` for the workers (the App's default port). Default: the inherited `PORT`, else the App's 3000. */
  port?: number;
  /**
   * Sets `HOST` for the workers (the App's listen address; `127.0.0.1` for this machine only).
   * Default: the inherited `HOST`, else the App's own `host`, else every interface.
   */
  host?: string;
  /** Arguments passed to the entry (`process.argv.slice(2)` in the worker). Default none. */
  args?: string[];
  /** Node options of the workers. Default: the primary's `process.execArgv` (so `--import tsx` carries over). */
  execArgv?: string[];
  /** Extra environment variables for the workers (on top of the primary's). */
  env?: Record<string, string>;
  /** Default: `newLogger(NODE_ENV === "production")`. */
  logger?: Logger;
  /** A worker not ready this long after its fork is killed (a crash), or ends a reload. Default 30000. */
  readyTimeout?: number;
  /** Budget assumed for a worker that has not reported its App's own `shutdownTimeout`. Default 10000. */
  shutdownTimeout?: number;
  /** SIGKILL a draining worker still alive this long after its budget. Default 1000. */
  killMargin?: number;
  /** Heartbeat period of the workers. Default 1000. */
  heartbeatInterval?: number;
  /** A worker silent for this long (blocked event loop) is killed and replaced; 0 turns the watchdog off. Default 10000. */
  watchdogTimeout?: number;
  backoff?: BackoffOptions;
  crashLoop?: CrashLoopOptions;
  /** SIGINT/SIGTERM stop, SIGHUP reloads. Default true. */
  handleSignals?: boolean;
  /** Exit the process (0 or 1) once stopped. Default true. */
  exitProcess?: boolean;
  /**
   * The Unix socket `keelson status` and `keelson reload` talk to, or false for none. Default:
   * `KEELSON_CONTROL_SOCKET`, else a file named by a hash of the working directory and the port
   * in `$XDG_RUNTIME_DIR/keelson/` or `<tmpdir>/keelson-<uid>/` (a 0700 folder; the socket is 0600).
   */
  controlSocket?: string | false;
  /**
   * Replace a worker whose RSS stays above this for `maxMemoryWindow`, the way a reload does (its
   * replacement is ready before it drains): bytes, or a size such as `"512M"`. Default: no limit.
   */
  maxMemory?: number | string;
  /** How long the RSS must stay above `maxMemory` (it is measured every heartbeat period). Default 30000. */
  maxMemoryWindow?: number;
  /**
   * Who spreads connections over the workers: `"round-robin"` (the primary accepts and passes them
   * on) or `"reuseport"` (each worker listens itself with SO_REUSEPORT, the kernel spreads them;
   * Linux, Node 22.12+, `net.ipv4.tcp_migrate_req=1`, else refused with the reason). Default:
   * `KEELSON_BALANCER`, else `"round-robin"`. See docs/supervisor.md, "Balancers".
   */
  balancer?: Balancer;
}

/** SupervisorOptions with every default applied. */
export interface ResolvedSupervisorOptions extends Required<Omit<SupervisorOptions, "port" | "host" | "backoff" | "crashLoop" | "maxMemory" | keyof FeatureOptions>>, ResolvedFeatureOptions {
  port: number | undefined;
  host: string | undefined;
  /** Bytes; undefined when there is no limit. */
  maxMemory: number | undefined;
  backoff: Required<BackoffOptions>;
  crashLoop: Required<CrashLoopOptions>;
}

function positiveInteger(value: number, what: string, max = Number.MAX_SAFE_INTEGER, shown = String(value)): number {
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new Error(`${what} must be a positive integer${max === Number.MAX_SAFE_INTEGER ? "" : ` (at most ${max})`}, got ${shown}`);
  }
  return value;
}

/** A time in ms for a timer: a longer one than MAX_TIMER_MS would overflow and fire at once. */
function nonNegative(value: number, what: string): number {
  return checkNumber(value, what, { min: 0, max: MAX_TIMER_MS });
}

/** A time in ms that must not be 0 (a 0 ready timeout or crash window would mean "never"). */
function positiveMs(value: number, what: string): number {
  return checkNumber(value, what, { above: 0, max: MAX_TIMER_MS });
}

/** Reads a worker count from the environment (`WORKERS`, then `WEB_CONCURRENCY`); undefined when neither is set. */
export function readWorkersEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  for (const name of ["WORKERS", "WEB_CONCURRENCY"] as const) {
    const raw = env[name];
    if (raw !== undefined && raw.trim() !== "") return positiveInteger(/^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN, name, undefined, JSON.stringify(raw));
  }
  return undefined;
}

/** What resolveOptions made: a Supervisor given one of these takes it as it is instead of resolving again. */
const resolvedOnce = new WeakSet<ResolvedSupervisorOptions>();

/** Whether `options` came from resolveOptions (every default applied, every value checked). */
export function isResolved(options: SupervisorOptions | ResolvedSupervisorOptions): options is ResolvedSupervisorOptions {
  return resolvedOnce.has(options as ResolvedSupervisorOptions);
}

/**
 * Applies the defaults and validates; throws a one-line reason on a bad value. `host`: what the
 * balancer check reads of the system. The result can be handed to `new Supervisor(…)`, which then
 * uses it as it is: `keelson start` resolves once, forks its first workers from it, and gives the
 * same object to the supervisor.
 *
 * @example
 * const options = resolveOptions({ entry: "dist/main.js", workers: 2 });
 * await new Supervisor(options).start();
 */
export function resolveOptions(options: SupervisorOptions, host: BalancerHost = systemHost): ResolvedSupervisorOptions {
  const resolved = resolveEach(options, host);
  resolvedOnce.add(resolved);
  return resolved;
}

function resolveEach(options: SupervisorOptions, host: BalancerHost): ResolvedSupervisorOptions {
  const { backoff = {}, crashLoop = {} } = options;
  if (options.port !== undefined) checkNumber(options.port, "port", PORT_RULE);
  const heartbeatInterval = positiveInteger(options.heartbeatInterval ?? 1000, "heartbeatInterval", MAX_TIMER_MS);
  const watchdogTimeout = nonNegative(options.watchdogTimeout ?? 10_000, "watchdogTimeout");
  if (watchdogTimeout !== 0 && watchdogTimeout <= heartbeatInterval) {
    throw new Error(`watchdogTimeout (${watchdogTimeout}ms) must exceed heartbeatInterval (${heartbeatInterval}ms), or be 0 (off)`);
  }
  const balancer = resolveBalancer(options.balancer, process.env, host);
  // HOST is resolved here, not only inherited, so that the metrics port can follow it.
  const listenHost = checkHost(options.host, "host") ?? checkHost((options.env?.HOST ?? process.env.HOST)?.trim() || undefined, "HOST");
  const initialBackoff = nonNegative(backoff.initial ?? 100, "backoff.initial");
  const maxBackoff = nonNegative(backoff.max ?? 10_000, "backoff.max");
  if (initialBackoff > maxBackoff) throw new Error(`backoff.initial (${initialBackoff}ms) must not exceed backoff.max (${maxBackoff}ms)`);
  return {
    entry: options.entry,
    workers: positiveInteger(options.workers ?? readWorkersEnv() ?? availableParallelism(), "workers"),
    // reuseport: the workers bind the port themselves, so the primary must know it before they do.
    port: balancer === "reuseport" ? options.port ?? askedPort({ port: undefined, env: options.env ?? {} }) ?? DEFAULT_PORT : options.port,
    host: listenHost,
    balancer,
    args: options.args ?? [],
    execArgv: options.execArgv ?? process.execArgv,
    env: options.env ?? {},
    logger: options.logger ?? newLogger(process.env.NODE_ENV === "production"),
    readyTimeout: positiveMs(options.readyTimeout ?? 30_000, "readyTimeout"),
    shutdownTimeout: nonNegative(options.shutdownTimeout ?? 10_000, "shutdownTimeout"),
    killMargin: nonNegative(options.killMargin ?? 1000, "killMargin"),
    heartbeatInterval,
    watchdogTimeout,
    backoff: {
      initial: initialBackoff,
      max: maxBackoff,
      resetAfter: nonNegative(backoff.resetAfter ?? 30_000, "backoff.resetAfter"),
    },
    crashLoop: {
      maxCrashes: positiveInteger(crashLoop.maxCrashes ?? 10, "crashLoop.maxCrashes"),
      window: positiveMs(crashLoop.window ?? 60_000, "crashLoop.window"),
    },
    handleSignals: options.handleSignals ?? true,
    exitProcess: options.exitProcess ?? true,
    // The service's address goes to the features: `--host 127.0.0.1` must not leave the metrics on every interface.
    ...resolveFeatureOptions(options, process.env, { host: listenHost }),
    controlSocket: resolveControlSocket(options),
    maxMemory: resolveMaxMemory(options.maxMemory),
    maxMemoryWindow: nonNegative(options.maxMemoryWindow ?? 30_000, "maxMemoryWindow"),
  };
}

function resolveControlSocket(options: SupervisorOptions): string | false {
  if (options.controlSocket !== undefined) return options.controlSocket;
  const fromEnv = process.env.KEELSON_CONTROL_SOCKET;
  if (fromEnv !== undefined && fromEnv !== "") return fromEnv;
  return defaultControlSocket(process.cwd(), effectivePort(options.port));
}

function resolveMaxMemory(value: number | string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string") return parseSize(value);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`maxMemory must be a number of bytes above 0, got ${String(value)}`);
  return value;
}

/**
 * The port the workers are asked to serve: `port` (`--port`), else the `PORT` they inherit; undefined
 * when neither is set (the App's own `port`, else 3000, decides) or 0 (a free port the kernel picks).
 */
export function askedPort(options: Pick<ResolvedSupervisorOptions, "port" | "env">, env: NodeJS.ProcessEnv = process.env): number | undefined {
  return (options.port ?? readPortEnv(options.env.PORT === undefined ? env : options.env)) || undefined;
}
