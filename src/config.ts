import { DEFAULT_PORT, MS_ABOVE_0, MS_FROM_0, PORT_RULE, checkHost, checkNumber, checkOneOf, checkOptionalNumber, readPortEnv, show } from "./checks.js";
import type { DocsConfig } from "./docs/types.js";
import { createCors, type Cors, type CorsConfig } from "./http/cors.js";
import type { LoadSheddingOptions } from "./http/load-shed.js";
import { parseLogLevel } from "./logging/level.js";
import { Logger, type LogLevel } from "./logging/logger.js";
import { joinPath } from "./http/path.js";
import { resolveRequestIdHeader } from "./http/request-id.js";

/** Deployment environment; `production` turns off the docs routes and debug logs. */
export type Env = "development" | "staging" | "production";

/** Configuration of an App (docs/configuration.md). */
export interface KConfig {
  serviceName?: string;
  /** Version reported by GET /health. Default: `docs.version`, else `1.0.0`. */
  version?: string;
  /**
   * Listen port, when the environment variable `portEnv` (`PORT`) does not set one: the operator's
   * `PORT` (and `keelson start --port`) wins over the port written in the code. Default 3000.
   */
  port?: number;
  /**
   * The environment variable that overrides `port`. Default `"PORT"`. A second App in the same
   * process (an admin listener beside the service) names its own (`"ADMIN_PORT"`), or `false` to
   * listen on `port` whatever the environment says.
   *
   * @example
   * const admin = new App({ serviceName: "admin", port: 9100, portEnv: "ADMIN_PORT" });
   */
  portEnv?: string | false;
  /**
   * Listen address (`127.0.0.1` for this machine only), when the environment variable `HOST` does
   * not set one; `HOST` is read by the App that reads `PORT` (the default `portEnv`), so a second App
   * with a `portEnv` of its own keeps its address. Default: every interface (Node's default).
   */
  host?: string;
  /** Default: `NODE_ENV` when it is one of the three values, else `development`. */
  env?: Env;
  disableHealth?: boolean;
  docs?: DocsConfig;
  /**
   * The App's logger (`app.logger`, whose `error()` exits the process; handlers get `ctx.logger`).
   * Default: `new Logger({ isProduction: env === "production", level: logLevel })`.
   */
  logger?: Logger;
  /**
   * Threshold of the App's logger and of every request logger: `debug`, `info`, `warn` or `error`.
   * Default: the `LOG_LEVEL` environment variable when set, else `info` in production and `debug`
   * otherwise. Not with `logger` (give that logger its own `level`). Routes can override it (`logLevel`).
   */
  logLevel?: LogLevel;
  /**
   * The request header that carries the request id, read on the request and set on the response.
   * Default `x-request-id`.
   */
  requestIdHeader?: string;
  /**
   * Whether an incoming request id (well formed: 1–128 of `A-Z a-z 0-9 . _ : -`) is kept. `false`
   * when clients reach the service directly and must not choose ids: every request gets a new one.
   * Default true.
   */
  trustRequestId?: boolean;
  /** Default: allow any origin. */
  cors?: CorsConfig | false;
  /** Largest accepted request body in bytes, an integer >= 0. Default 1 MiB. */
  bodyLimit?: number;
  /** Per-checker timeout of GET /health in ms. Default 500 (well under Kubernetes' 1 s probe timeout). */
  healthTimeout?: number;
  /**
   * One budget in ms for the whole shutdown, from the first signal or `close()`: delay, drain and
   * hooks. The drain takes at most half of what is left after the delay (then the connections still
   * open are destroyed and the hooks start). At the deadline the hooks' AbortSignal fires, open
   * connections are destroyed, hooks not yet started are skipped, and the exit code is 1. Default 10000.
   */
  shutdownTimeout?: number;
  /**
   * Time in ms between the signal and closing the listener (part of the budget, so less than
   * `shutdownTimeout`): requests are still served, with `Connection: close`, while /health answers 503. Default 0.
   */
  shutdownDelay?: number;
  /**
   * Reject new requests fast with 503 and `Retry-After` while this process is saturated (event-loop
   * delay or utilisation over a limit, or too many requests in flight); GET /health is always served.
   * `true` for the defaults. Default: off.
   */
  loadShedding?: boolean | LoadSheddingOptions;
}

export const DEFAULT_DOCS_PATH = "/docs";
export const DEFAULT_DOCS_VERSION = "1.0.0";
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
export const DEFAULT_HEALTH_TIMEOUT = 500;
export const DEFAULT_SHUTDOWN_TIMEOUT = 10_000;
export const ENVS: readonly Env[] = ["development", "staging", "production"];

/** `portEnv` is an environment variable's name (letters, digits, `_`, not starting with a digit) or false. */
export function checkPortEnv(portEnv: unknown): asserts portEnv is string | false {
  if (portEnv === false || (typeof portEnv === "string" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(portEnv))) return;
  throw new Error(`portEnv must be an environment variable name (such as "ADMIN_PORT") or false, got ${JSON.stringify(portEnv) ?? String(portEnv)}`);
}

/**
 * Refuses, with the option's name and value, every numeric or enumerated setting of a KConfig
 * (defaults applied) that has no meaning: NaN from `Number(undefined)`, Infinity, negatives,
 * fractions of bytes, an unknown `env`, a `shutdownDelay` that leaves no budget.
 */
export function checkConfig(config: Pick<Required<KConfig>, "port" | "env" | "bodyLimit" | "healthTimeout" | "shutdownTimeout" | "shutdownDelay"> & Pick<KConfig, "cors">): void {
  checkNumber(config.port, "port", PORT_RULE);
  checkOneOf(config.env, "env", ENVS);
  checkNumber(config.bodyLimit, "bodyLimit", { integer: true, min: 0 });
  checkNumber(config.healthTimeout, "healthTimeout", MS_ABOVE_0);
  checkNumber(config.shutdownTimeout, "shutdownTimeout", MS_ABOVE_0);
  checkNumber(config.shutdownDelay, "shutdownDelay", MS_FROM_0);
  // The delay is spent from the budget: a delay as long as the budget skips every hook.
  if (config.shutdownDelay >= config.shutdownTimeout) {
    throw new Error(`shutdownDelay (${config.shutdownDelay}ms) must be less than shutdownTimeout (${config.shutdownTimeout}ms): the delay is part of the shutdown budget`);
  }
  if (config.cors) checkOptionalNumber(config.cors.maxAge, "cors.maxAge", { integer: true, min: 0 });
}

/** KConfig with every default applied. */
export interface ResolvedConfig extends Required<Pick<KConfig, "port" | "portEnv" | "env" | "disableHealth" | "bodyLimit" | "healthTimeout" | "shutdownTimeout" | "shutdownDelay">> {
  serviceName: string;
  version: string;
  host: string | undefined;
  docs: DocsConfig & { path: string; title: string; version: string; shedsLoad?: boolean };
  /** Lower-cased. */
  requestIdHeader: string;
  trustRequestId: boolean;
}

/**
 * What an App is made of, resolved from its KConfig in one pass: the settings (`app.config`), the
 * logger, the CORS policy and the load-shedding options, every one checked.
 */
export interface AppSettings {
  readonly config: ResolvedConfig;
  readonly logger: Logger;
  /** Undefined with `cors: false`. */
  readonly cors: Cors | undefined;
  /** Undefined when load shedding is off. */
  readonly loadShedding: LoadSheddingOptions | undefined;
}

/** The App's logger: the one given, else one at `logLevel` (else LOG_LEVEL, else the spec's rule). */
function resolveLogger(config: KConfig, isProduction: boolean): Logger {
  if (config.logLevel === undefined) return config.logger ?? new Logger({ isProduction });
  const level = parseLogLevel(config.logLevel, "logLevel");
  if (config.logger !== undefined) {
    throw new Error(`logLevel ("${level}") cannot be combined with logger: give that Logger its own level (new Logger({ isProduction, level }))`);
  }
  return new Logger({ isProduction, level });
}

function resolveBoolean(value: unknown, name: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") throw new Error(`${name} must be true or false, got ${show(value)}`);
  return value;
}

/**
 * The defaults of docs/configuration.md applied, `PORT` and `NODE_ENV` read, every setting checked:
 * `app.config`, and the logger, CORS policy and load-shedding options the App is built with.
 */
export function resolveConfig(config: KConfig): AppSettings {
  const portEnv = config.portEnv ?? "PORT";
  checkPortEnv(portEnv);
  // Read whether or not the code sets a port: the operator's variable wins (docs/configuration.md#the-port).
  const envPort = portEnv === false ? undefined : readPortEnv(process.env, portEnv);
  const nodeEnv = process.env.NODE_ENV as Env | undefined;
  const docsVersion = config.docs?.version ?? DEFAULT_DOCS_VERSION;
  const serviceName = config.serviceName ?? "keelson-service";
  const resolved: ResolvedConfig = {
    serviceName,
    version: config.version ?? docsVersion,
    port: envPort ?? config.port ?? DEFAULT_PORT,
    portEnv,
    // HOST goes with PORT: an admin App with its own portEnv must not follow the operator onto every interface.
    host: (portEnv === "PORT" ? checkHost(process.env.HOST?.trim() || undefined, "HOST") : undefined) ?? checkHost(config.host, "host"),
    env: config.env ?? (nodeEnv && ENVS.includes(nodeEnv) ? nodeEnv : "development"),
    disableHealth: config.disableHealth ?? false,
    docs: {
      ...config.docs, path: joinPath(config.docs?.path ?? DEFAULT_DOCS_PATH, ""), title: config.docs?.title ?? serviceName, version: docsVersion,
      // The document lists the 503 of load shedding on every operation it can hit.
      ...(config.loadShedding !== undefined && config.loadShedding !== false && { shedsLoad: true }),
    },
    bodyLimit: config.bodyLimit ?? DEFAULT_BODY_LIMIT,
    healthTimeout: config.healthTimeout ?? DEFAULT_HEALTH_TIMEOUT,
    shutdownTimeout: config.shutdownTimeout ?? DEFAULT_SHUTDOWN_TIMEOUT,
    shutdownDelay: config.shutdownDelay ?? 0,
    requestIdHeader: resolveRequestIdHeader(config.requestIdHeader),
    trustRequestId: resolveBoolean(config.trustRequestId, "trustRequestId", true),
  };
  checkConfig({ ...resolved, cors: config.cors });
  const shedding = config.loadShedding ?? false;
  return {
    config: resolved,
    logger: resolveLogger(config, resolved.env === "production"),
    cors: config.cors === false ? undefined : createCors(config.cors ?? {}),
    loadShedding: shedding === false ? undefined : shedding === true ? {} : shedding,
  };
}
