/**
 * The request logger (`ctx.logger`): the App's Logger bound to one request, or to one run of a job.
 * Every line carries the request id and the trace id, or the job's name and tick (and the fields of
 * `child()`), in both formats; its `error()` logs and returns. The fields are serialised once, when
 * the logger is made, not on every line.
 */
import { inspect } from "node:util";
import { escapeText, formatMessage, jsonString, jsonText } from "./format.js";
import { RANK_DEBUG, RANK_ERROR, RANK_INFO, RANK_WARN } from "./level.js";
import type { Logger } from "./logger.js";

/**
 * A value of a structured field: strings, numbers, booleans and null as they are, objects and arrays
 * as JSON (nested in JSON lines), errors as `Name: message`, bigints as strings.
 */
export type LogFieldValue = string | number | boolean | null | bigint | object;

/** Keys every line already has: a field may not reuse them. */
const RESERVED_KEYS: ReadonlySet<string> = new Set(["level", "time", "message", "worker", "pid", "request_id", "trace_id"]);
// Plain keys only: a text line stays `key=value key=value`, a JSON key needs no escaping.
const FIELD_KEY = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;
// A text value with any of these (or empty) is quoted as a JSON string, as logfmt does.
const NEEDS_QUOTES = /[\s"=\\]/;

/**
 * `ctx.logger`: logs for one request, with its request id and trace id on every line. A job's
 * `ctx.logger` is one too, with the job's name and tick (`job`, `tick`) on every line instead.
 *
 * **Its `error()` does not exit**: it writes an error line and returns, unlike the App's
 * `Logger.error()`, which terminates the process (the spec's contract for fatal startup errors).
 * Lines below the threshold (the App logger's level, or the route's `logLevel`) cost one comparison.
 *
 * @example
 * app.route(post("/payments", async (ctx) => {
 *   const log = ctx.logger.child({ user_id: 42 });
 *   log.info("charging %d cents", 1250);
 *   // text: [INFO] 2026-11-24 20:15:02 charging 1250 cents request_id=3f9c0a7b1e-17 user_id=42
 *   // JSON: {"level":"info","time":"…","message":"charging 1250 cents","request_id":"3f9c0a7b1e-17","user_id":42}
 *   log.error("payment failed: %s", "card declined"); // logged; the request goes on
 * }));
 */
export class RequestLogger {
  readonly #logger: Logger;
  readonly #threshold: number;
  /** The ids and fields as this logger's format writes them after the message. */
  readonly #suffix: string;

  /** @internal Built by keelson for each request (see `ctx.logger`). */
  constructor(logger: Logger, threshold: number, suffix: string) {
    this.#logger = logger;
    this.#threshold = threshold;
    this.#suffix = suffix;
  }

  /** @internal The logger of one request: `request_id` and, when there is one, `trace_id`. */
  static forRequest(logger: Logger, threshold: number, requestId: string, traceId: string): RequestLogger {
    let suffix = formatField(logger, "request_id", requestId);
    if (traceId !== "") suffix += formatField(logger, "trace_id", traceId);
    return new RequestLogger(logger, threshold, suffix);
  }

  /**
   * @internal The logger of one run of a job: `job` (its name) and `tick` (its scheduled time, ISO 8601)
   * on every line, at the App logger's level.
   */
  static forJob(logger: Logger, name: string, tick: string): RequestLogger {
    return new RequestLogger(logger, logger.threshold, formatField(logger, "job", name) + formatField(logger, "tick", tick));
  }

  /** Whether a line at `debug` would be written (to skip building what only debug lines use). */
  get debugEnabled(): boolean {
    return this.#threshold <= RANK_DEBUG;
  }

  debug(format: string, ...args: unknown[]): void {
    if (this.#threshold <= RANK_DEBUG) this.#logger.writeWithFields(RANK_DEBUG, formatMessage(format, args), this.#suffix);
  }

  info(format: string, ...args: unknown[]): void {
    if (this.#threshold <= RANK_INFO) this.#logger.writeWithFields(RANK_INFO, formatMessage(format, args), this.#suffix);
  }

  warn(format: string, ...args: unknown[]): void {
    if (this.#threshold <= RANK_WARN) this.#logger.writeWithFields(RANK_WARN, formatMessage(format, args), this.#suffix);
  }

  /** Writes an error line and returns: **never exits the process** (unlike the App's `Logger.error`). */
  error(format: string, ...args: unknown[]): void {
    if (this.#threshold <= RANK_ERROR) this.#logger.writeWithFields(RANK_ERROR, formatMessage(format, args), this.#suffix);
  }

  /**
   * A logger whose lines also carry `fields` (JSON: members after `message`; text: `key=value`
   * after the message, escaped like every field, and quoted when a value has spaces, `"`, `=` or
   * `\`). Keys are 1–64 of `A-Z a-z 0-9 _ . -`, starting with a letter or `_`, and not one a line
   * already has (`level`, `time`, `message`, `worker`, `pid`, `request_id`, `trace_id`): anything
   * else is refused with a TypeError naming it. A key given again (here or by a parent) is written again.
   *
   * @example
   * const log = ctx.logger.child({ user_id: user.id, tenant: "acme" });
   * log.info("profile updated"); // … profile updated request_id=… user_id=7 tenant=acme
   */
  child(fields: Readonly<Record<string, LogFieldValue | undefined>>): RequestLogger {
    if (typeof fields !== "object" || fields === null) {
      throw new TypeError(`invalid child fields: ${safeInspect(fields)} (expected an object of key: value)`);
    }
    let suffix = this.#suffix;
    for (const [key, value] of Object.entries(fields)) {
      if (!FIELD_KEY.test(key)) throw new TypeError(`invalid log field name: ${JSON.stringify(key)} (1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or _)`);
      if (RESERVED_KEYS.has(key)) throw new TypeError(`invalid log field name: "${key}" is written on every line already`);
      if (value !== undefined) suffix += formatField(this.#logger, key, value);
    }
    return new RequestLogger(this.#logger, this.#threshold, suffix);
  }
}

/** ` key=value` or `,"key":value` for `logger`'s format; `key` is a plain key. */
function formatField(logger: Logger, key: string, value: LogFieldValue): string {
  return logger.format === "json" ? `,"${key}":${jsonValue(value)}` : ` ${key}=${textValue(value)}`;
}

function jsonValue(value: LogFieldValue): string {
  if (typeof value === "string") return jsonString(value);
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : jsonString(String(value));
  if (typeof value === "boolean" || value === null) return String(value);
  if (typeof value === "bigint") return jsonString(String(value));
  // Objects and arrays nest as JSON; what has no JSON form is written as text.
  if (!(value instanceof Error)) {
    const literal = jsonText(value);
    if (literal !== undefined) return literal;
  }
  return jsonString(toText(value));
}

function textValue(value: LogFieldValue): string {
  const text = typeof value === "string" ? value : typeof value === "object" && value !== null ? toText(value) : String(value);
  // jsonString escapes every control character, so a quoted value cannot break the line either.
  return text === "" || NEEDS_QUOTES.test(text) ? jsonString(text) : escapeText(text);
}

/** An object field as one line of text: errors as `Name: message`, others as JSON, else util.inspect. */
function toText(value: object): string {
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  return jsonText(value) ?? safeInspect(value);
}

function safeInspect(value: unknown): string {
  return inspect(value, { breakLength: Infinity, depth: 4 });
}
