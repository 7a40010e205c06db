/**
 * Structured logger: human-readable text in development, one JSON object per
 * line in production. Lines are buffered and written once per event-loop turn
 * (see logging/sink.ts), and flushed synchronously on process exit.
 */
import { escapeText, formatDuration, formatMessage, isoTime, jsonString, textTime } from "./format.js";
import { jsonOrigin, textOrigin } from "./origin.js";
import { checkOneOf } from "../checks.js";
import { flushAllSinks, sinkFor, type LogWriter, type Sink } from "./sink.js";
import { LineHead, methodPart, statusPart } from "./request-line.js";

export type { LogWriter } from "./sink.js";

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
}

/** Settings for `new Logger()`; application code uses newLogger() instead. */
export interface LoggerOptions {
  isProduction: boolean;
  /** Defaults to JSON in production and text otherwise. */
  format?: LogFormat;
  /** A writer, or a file descriptor written with fs.writeSync. Defaults to 1 (stdout). */
  output?: number | LogWriter;
}

interface Level {
  readonly name: string;
  readonly tag: string;
  /** The start of this level's JSON request lines. */
  readonly head: LineHead;
}

const DEBUG: Level = { name: "debug", tag: "[DEBUG] ", head: new LineHead("debug") };
const INFO: Level = { name: "info", tag: "[INFO] ", head: new LineHead("info") };
const WARN: Level = { name: "warn", tag: "[WARN] ", head: new LineHead("warn") };
const ERROR: Level = { name: "error", tag: "[ERROR] ", head: new LineHead("error") };

/** Leveled printf-style logger; see newLogger(). */
export class Logger {
  /** Line shape: text or JSON. */
  readonly format: LogFormat;
  /** Production loggers default to JSON and drop debug lines. */
  readonly isProduction: boolean;
  /** Whether debug() writes anything; false in production. */
  readonly debugEnabled: boolean;
  private readonly sink: Sink;
  private readonly json: boolean;

  constructor(options: LoggerOptions) {
    this.isProduction = options.isProduction;
    this.format = checkOneOf(options.format ?? (options.isProduction ? LogFormatJSON : LogFormatText), "format", [LogFormatText, LogFormatJSON]);
    this.debugEnabled = !options.isProduction;
    this.sink = sinkFor(options.output ?? 1);
    this.json = this.format === LogFormatJSON;
    this.sink.reportDropsWith((message) => this.line(WARN, message));
  }

  /** Logs at info level. */
  info(format: string, ...args: unknown[]): void {
    this.log(INFO, formatMessage(format, args));
  }

  /** Logs at debug level; a no-op (without formatting) when debug is disabled. */
  debug(format: string, ...args: unknown[]): void {
    if (this.debugEnabled) this.log(DEBUG, formatMessage(format, args));
  }

  /** Logs at warn level. */
  warn(format: string, ...args: unknown[]): void {
    this.log(WARN, formatMessage(format, args));
  }

  /** Logs at error level, flushes everything buffered (all loggers), and terminates the process with exit code 1. */
  error(format: string, ...args: unknown[]): never {
    this.log(ERROR, formatMessage(format, args));
    flushAllLoggers();
    process.exit(1);
  }

  /** Logs at error level WITHOUT terminating (used by the framework for 5xx request lines and recovered panics). */
  logError(format: string, ...args: unknown[]): void {
    this.log(ERROR, formatMessage(format, args));
  }

  /** One request log line; level: status < 400 info, 4xx warn, 5xx error (never terminates). */
  request(entry: RequestLogEntry): void {
    const status = entry.status;
    const level = status >= 500 ? ERROR : status >= 400 ? WARN : INFO;
    // Integer or nothing: NaN or a fraction would make the JSON line invalid or odd.
    const code = Number.isInteger(status) ? status : 0;
    const duration = formatDuration(entry.durationMs);
    if (!this.json) {
      const target = escapeText(entry.method + " " + entry.path);
      this.sink.write(`${level.tag}${textTime(Date.now())}${textOrigin} ${target} ${code} ${duration}\n`);
      return;
    }
    // Cached parts, not JSON.stringify of an object: this runs once per request.
    const line = level.head.read(Date.now()) + methodPart(entry.method) + jsonString(entry.path) + statusPart(code) + duration;
    if (entry.requestId === undefined && entry.traceId === undefined) {
      this.sink.write(line + '"}\n');
      return;
    }
    let ids = '"';
    if (entry.requestId !== undefined) ids += `,"request_id":${jsonString(entry.requestId)}`;
    if (entry.traceId !== undefined) ids += `,"trace_id":${jsonString(entry.traceId)}`;
    this.sink.write(line + ids + "}\n");
  }

  /** Returns a new Logger with the same settings writing to `writer`; the original is unchanged. */
  withWriter(writer: LogWriter): Logger {
    return new Logger({ isProduction: this.isProduction, format: this.format, output: writer });
  }

  /** Synchronously writes out everything buffered by this logger (and by others sharing its output). */
  flush(): void {
    this.sink.flush();
  }

  private log(level: Level, message: string): void {
    this.sink.write(this.line(level, message));
  }

  private line(level: Level, message: string): string {
    const now = Date.now();
    return this.json
      ? `{"level":"${level.name}","time":"${isoTime(now)}"${jsonOrigin},"message":${jsonString(message)}}\n`
      : `${level.tag}${textTime(now)}${textOrigin} ${escapeText(message)}\n`;
  }
}

/** Development (false): text with debug on. Production (true): JSON with debug off. Writes to stdout. */
export function newLogger(isProduction: boolean): Logger {
  return new Logger({ isProduction });
}

/** Like newLogger() with an explicit format; debug still follows isProduction. */
export function newLoggerWithFormat(isProduction: boolean, format: LogFormat): Logger {
  return new Logger({ isProduction, format });
}

/** Flushes every logger's buffer synchronously (the framework calls it before process.exit). */
export function flushAllLoggers(): void {
  flushAllSinks();
}
