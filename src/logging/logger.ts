/**
 * Structured logger: human-readable text in development, one JSON object per
 * line in production. Lines are buffered and written once per event-loop turn
 * (see logging/sink.ts), and flushed synchronously on process exit.
 */
import { escapeText, formatDuration, formatMessage, isoTime, jsonContent, jsonString, textTime } from "./format.js";
import { RANK_DEBUG, RANK_ERROR, RANK_INFO, RANK_WARN, defaultLogLevel, levelRank, parseLogLevel, type LogLevel } from "./level.js";
import { jsonOrigin, textOrigin } from "./origin.js";
import { checkOneOf } from "../checks.js";
import { flushAllSinks, sinkFor, type LogWriter, type Sink } from "./sink.js";
import { LineHead, methodPart, statusPart } from "./request-line.js";

export type { LogWriter } from "./sink.js";
export type { LogLevel, RouteLogLevel } from "./level.js";

/** Human-readable lines: `[INFO] 2026-11-22 05:30:33 message`. */
export const LogFormatText = "text";
/** One JSON object per line: `{"level":"info","time":"...","message":"..."}`. */
export const LogFormatJSON = "json";
/** Output format of a Logger. */
export type LogFormat = typeof LogFormatText | typeof LogFormatJSON;

/** One request log entry; the App calls logger.request() once per HTTP request. */
export interface RequestLogEntry {
  method: string;
  path: string;
  status: number;
  durationMs: number;
  requestId?: string;
  traceId?: string;
  /** What `idempotency()` did with the request (`replayed`, `conflict`, …), when it ran. */
  idempotency?: string;
}

/** Settings for `new Logger()`; application code uses newLogger() instead. */
export interface LoggerOptions {
  isProduction: boolean;
  /** Defaults to JSON in production and text otherwise. */
  format?: LogFormat;
  /** A writer, or a file descriptor written with fs.writeSync. Defaults to 1 (stdout). */
  output?: number | LogWriter;
  /**
   * Lines below this level are not written. Default: the `LOG_LEVEL` environment variable when set,
   * else `info` in production and `debug` otherwise. A bad value (here or in `LOG_LEVEL`) is refused.
   */
  level?: LogLevel;
}

interface Level {
  readonly name: string;
  readonly rank: number;
  readonly tag: string;
  /** The start of this level's JSON request lines. */
  readonly head: LineHead;
}

const DEBUG: Level = { name: "debug", rank: RANK_DEBUG, tag: "[DEBUG] ", head: new LineHead("debug") };
const INFO: Level = { name: "info", rank: RANK_INFO, tag: "[INFO] ", head: new LineHead("info") };
const WARN: Level = { name: "warn", rank: RANK_WARN, tag: "[WARN] ", head: new LineHead("warn") };
const ERROR: Level = { name: "error", rank: RANK_ERROR, tag: "[ERROR] ", head: new LineHead("error") };
const BY_RANK: Readonly<Record<number, Level>> = { [RANK_DEBUG]: DEBUG, [RANK_INFO]: INFO, [RANK_WARN]: WARN, [RANK_ERROR]: ERROR };

/**
 * The App's leveled printf-style logger (`app.logger`); see newLogger().
 *
 * **`error()` terminates the process** (exit code 1, after flushing): it is for fatal configuration
 * errors at startup. Inside a request, log through `ctx.logger` (a {@link RequestLogger}), whose
 * `error()` writes the line and returns; here, `logError()` does the same.
 */
export class Logger {
  /** Line shape: text or JSON. */
  readonly format: LogFormat;
  /** Production loggers default to JSON and drop debug lines. */
  readonly isProduction: boolean;
  /** The threshold: lines below this level are not written (`error()` always is). */
  readonly level: LogLevel;
  /** Whether debug() writes anything: the level is `debug`. */
  readonly debugEnabled: boolean;
  /** @internal The level's rank, read on every line. */
  readonly threshold: number;
  readonly #sink: Sink;
  readonly #json: boolean;

  constructor(options: LoggerOptions) {
    this.isProduction = options.isProduction;
    this.format = checkOneOf(options.format ?? (options.isProduction ? LogFormatJSON : LogFormatText), "format", [LogFormatText, LogFormatJSON]);
    this.level = options.level === undefined ? defaultLogLevel(options.isProduction) : parseLogLevel(options.level, "level");
    this.threshold = levelRank(this.level);
    this.debugEnabled = this.threshold <= RANK_DEBUG;
    this.#sink = sinkFor(options.output ?? 1);
    this.#json = this.format === LogFormatJSON;
    this.#sink.reportDropsWith((message) => this.#line(WARN, message));
  }

  /** Logs at info level (unless the level is above info). */
  info(format: string, ...args: unknown[]): void {
    if (this.threshold <= RANK_INFO) this.#log(INFO, formatMessage(format, args));
  }

  /** Logs at debug level; a no-op (without formatting) when debug is disabled. */
  debug(format: string, ...args: unknown[]): void {
    if (this.debugEnabled) this.#log(DEBUG, formatMessage(format, args));
  }

  /** Logs at warn level (unless the level is `error`). */
  warn(format: string, ...args: unknown[]): void {
    if (this.threshold <= RANK_WARN) this.#log(WARN, formatMessage(format, args));
  }

  /**
   * **Terminates the process.** Logs at error level (whatever the threshold), flushes everything
   * buffered (all loggers), and exits with code 1: the spec's contract for fatal configuration
   * errors at startup. Never call it while serving a request: a handler's `ctx.logger.error()`
   * logs and returns, and so does `logError()`.
   *
   * @example
   * if (!process.env.DATABASE_URL) app.logger.error("DATABASE_URL is not set"); // exits with code 1
   */
  error(format: string, ...args: unknown[]): never {
    this.#log(ERROR, formatMessage(format, args));
    flushAllLoggers();
    process.exit(1);
  }

  /** Logs at error level WITHOUT terminating (used by the framework for 5xx request lines and recovered panics). */
  logError(format: string, ...args: unknown[]): void {
    this.#log(ERROR, formatMessage(format, args));
  }

  /**
   * One request log line; level: status < 400 info, 4xx warn, 5xx error (never terminates).
   * Not written when that level is below `threshold` (a route's `logLevel`; default this logger's).
   */
  request(entry: RequestLogEntry, threshold: number = this.threshold): void {
    // Kept this small so that the optimising compiler inlines it at the App's call, where the entry
    // object literal is then never allocated.
    this.#request(entry.method, entry.path, entry.status, entry.durationMs, entry.requestId, entry.traceId, entry.idempotency, threshold);
  }

  #request(method: string, path: string, status: number, durationMs: number, requestId: string | undefined, traceId: string | undefined, idempotency: string | undefined, threshold: number): void {
    const level = status >= 500 ? ERROR : status >= 400 ? WARN : INFO;
    if (level.rank < threshold) return;
    // Integer or nothing: NaN or a fraction would make the JSON line invalid or odd.
    const code = Number.isInteger(status) ? status : 0;
    const duration = formatDuration(durationMs);
    if (!this.#json) {
      const target = escapeText(method + " " + path);
      let ids = "";
      if (requestId !== undefined) ids += " request_id=" + escapeText(requestId);
      if (traceId !== undefined) ids += " trace_id=" + escapeText(traceId);
      if (idempotency !== undefined) ids += " idempotency=" + escapeText(idempotency);
      this.#sink.write(`${level.tag}${textTime(Date.now())}${textOrigin} ${target} ${code} ${duration}${ids}\n`);
      return;
    }
    // Cached parts, not JSON.stringify of an object: this runs once per request. The quotes of the
    // path and the ids are in the constant parts beside them, which spares two joins for each.
    let line = level.head.read(Date.now()) + methodPart(method) + jsonContent(path) + statusPart(code) + duration;
    if (requestId !== undefined) line += '","request_id":"' + jsonContent(requestId);
    if (traceId !== undefined) line += '","trace_id":"' + jsonContent(traceId);
    if (idempotency !== undefined) line += '","idempotency":"' + jsonContent(idempotency);
    this.#sink.write(line + '"}\n');
  }

  /** Returns a new Logger with the same settings (level included) writing to `writer`; the original is unchanged. */
  withWriter(writer: LogWriter): Logger {
    return new Logger({ isProduction: this.isProduction, format: this.format, output: writer, level: this.level });
  }

  /**
   * @internal One line of a request logger at `rank`, with `fields` already in this logger's format
   * (JSON: `,"key":value…`; text: ` key=value…`). The caller checks the threshold.
   */
  writeWithFields(rank: number, message: string, fields: string): void {
    const level = BY_RANK[rank] ?? ERROR;
    const now = Date.now();
    this.#sink.write(
      this.#json
        ? `{"level":"${level.name}","time":"${isoTime(now)}"${jsonOrigin},"message":${jsonString(message)}${fields}}\n`
        : `${level.tag}${textTime(now)}${textOrigin} ${escapeText(message)}${fields}\n`,
    );
  }

  /** Synchronously writes out everything buffered by this logger (and by others sharing its output). */
  flush(): void {
    this.#sink.flush();
  }

  #log(level: Level, message: string): void {
    this.#sink.write(this.#line(level, message));
  }

  #line(level: Level, message: string): string {
    const now = Date.now();
    return this.#json
      ? `{"level":"${level.name}","time":"${isoTime(now)}"${jsonOrigin},"message":${jsonString(message)}}\n`
      : `${level.tag}${textTime(now)}${textOrigin} ${escapeText(message)}\n`;
  }
}

/**
 * Development (false): text with debug on. Production (true): JSON with debug off. Writes to stdout.
 * `LOG_LEVEL` (debug, info, warn, error), when set, is the threshold instead.
 */
export function newLogger(isProduction: boolean): Logger {
  return new Logger({ isProduction });
}

/** Like newLogger() with an explicit format; the level still follows isProduction (or `LOG_LEVEL`). */
export function newLoggerWithFormat(isProduction: boolean, format: LogFormat): Logger {
  return new Logger({ isProduction, format });
}

/** Flushes every logger's buffer synchronously (the framework calls it before process.exit). */
export function flushAllLoggers(): void {
  flushAllSinks();
}
