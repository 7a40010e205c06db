/**
 * Pure formatting helpers for the logger: printf-style messages, durations,
 * cached timestamps, JSON string literals and text-format escaping. Everything here is on the
 * per-request hot path, so the common cases return early without allocating.
 */
import { inspect } from "node:util";

// One line per entry: never let util.inspect wrap objects across lines.
const INSPECT_OPTIONS = { breakLength: Infinity, depth: 4 } as const;

/**
 * printf-style formatting, close to Go's fmt and Node's util.format:
 * `%s` and `%v` (value as text), `%d`/`%i` (integer, truncated), `%f` (number),
 * `%j` (JSON), `%o`/`%O` (util.inspect), `%%` (a literal percent sign).
 * A verb without a matching argument, or an unknown verb, is kept literally;
 * arguments left over are appended, each preceded by a space.
 */
export function formatMessage(format: string, args: readonly unknown[]): string {
  if (args.length === 0 && format.indexOf("%") === -1) return format;
  let out = "";
  let copied = 0;
  let next = 0;
  let at = format.indexOf("%");
  while (at !== -1 && at < format.length - 1) {
    const verb = format.charAt(at + 1);
    let rendered: string | undefined;
    if (verb === "%") rendered = "%";
    else if (next < args.length) {
      rendered = formatVerb(verb, args[next]);
      if (rendered !== undefined) next++;
    }
    if (rendered === undefined) {
      at = format.indexOf("%", at + 1);
      continue;
    }
    out += format.slice(copied, at) + rendered;
    copied = at + 2;
    at = format.indexOf("%", copied);
  }
  out += copied === 0 ? format : format.slice(copied);
  for (; next < args.length; next++) out += " " + formatValue(args[next]);
  return out;
}

function formatVerb(verb: string, value: unknown): string | undefined {
  switch (verb) {
    case "s":
    case "v":
      return formatValue(value);
    case "d":
    case "i":
      return typeof value === "bigint" ? String(value) : String(Math.trunc(toNumber(value)));
    case "f":
      return String(toNumber(value));
    case "j":
      return formatJson(value);
    case "o":
    case "O":
      return inspect(value, INSPECT_OPTIONS);
    default:
      return undefined;
  }
}

/** Strings as they are, errors with their stack, other objects via util.inspect. */
function formatValue(value: unknown): string {
  if (typeof value === "string") return value;
  if (value instanceof Error) return value.stack ?? String(value);
  if (typeof value === "object" && value !== null) return inspect(value, INSPECT_OPTIONS);
  if (typeof value === "function") return `[Function ${value.name || "(anonymous)"}]`;
  return String(value);
}

function toNumber(value: unknown): number {
  // Number(symbol) throws, and a log call must never throw.
  return typeof value === "symbol" ? Number.NaN : Number(value);
}

function formatJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? "undefined";
  } catch {
    // Cycles and BigInts are not JSON, but the message must still be written.
    return inspect(value, INSPECT_OPTIONS);
  }
}

// Filled as durations occur. Sized up front: a first entry far past an empty array's end would
// turn it into a dictionary.
const HUNDREDTHS = Array.from<string | undefined>({ length: 1000 });
const TENTHS = Array.from<string | undefined>({ length: 10_000 });

/**
 * Human duration for request lines. Rule: below 10 ms two decimals (`0.42ms`),
 * below 1000 ms one decimal (`12.3ms`), otherwise seconds with two decimals
 * (`1.23s`). The thresholds are on the rounded value, so 9.996 ms reads
 * `10.0ms`, not `10.00ms`. Negative or non-finite input reads `0.00ms`.
 */
export function formatDuration(ms: number): string {
  // Integer arithmetic instead of toFixed(): several times faster, and small
  // integers come out of V8's number-to-string cache.
  if (!(ms >= 0) || ms === Infinity) return "0.00ms";
  const hundredths = Math.round(ms * 100);
  // Below a second the forms are few, and each is kept once made: a request line then allocates
  // no string for its duration.
  if (hundredths < 1000) return (HUNDREDTHS[hundredths] ??= withDecimals(hundredths, 100) + "ms");
  const tenths = Math.round(ms * 10);
  if (tenths < 10_000) return (TENTHS[tenths] ??= withDecimals(tenths, 10) + "ms");
  return withDecimals(Math.round(ms / 10), 100) + "s";
}

function withDecimals(scaled: number, scale: 10 | 100): string {
  const whole = Math.floor(scaled / scale);
  const fraction = scaled - whole * scale;
  return whole + (scale === 100 && fraction < 10 ? ".0" : ".") + fraction;
}

// Anything but printable ASCII without `"` and `\`: such strings need real JSON escaping.
const NEEDS_JSON_ESCAPE = /[^\x20\x21\x23-\x5b\x5d-\x7e]/;

// What JSON.stringify leaves raw but a terminal or a line-splitting reader must not see: DEL,
// the C1 controls (U+009B is a CSI to many terminals) and the Unicode line/paragraph separators.
const RAW_IN_JSON = /[\x7f-\x9f\u2028\u2029]/;
const RAW_IN_JSON_ALL = /[\x7f-\x9f\u2028\u2029]/g;

// Up to this length a loop over the characters is cheaper than a call into the regex engine.
const SCAN_LIMIT = 64;

/** NEEDS_JSON_ESCAPE's test, negated, as a loop: printable ASCII other than `"` and `\`. */
function isPlainAscii(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return false;
  }
  return true;
}

/** `\u00XX`-style escape of one UTF-16 unit, valid in JSON and in JavaScript strings. */
function unicodeEscape(c: string): string {
  return "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
}

/**
 * `value` as a JSON string literal in which every control character is escaped (JSON.stringify
 * alone leaves DEL, C1 and U+2028/U+2029 raw). Nearly every method, path and id is plain
 * ASCII, and one regex test is cheaper than JSON.stringify for those.
 */
export function jsonString(value: string): string {
  return needsNoEscape(value) ? '"' + value + '"' : escapedLiteral(value);
}

/**
 * What `jsonString(value)` has between its quotes: `value` itself when nothing in it needs
 * escaping. For a line whose constant parts carry the quotes, two concatenations fewer.
 *
 * @example
 * '{"path":"' + jsonContent('/a"b') + '"}' // {"path":"/a\"b"}
 */
export function jsonContent(value: string): string {
  return needsNoEscape(value) ? value : escapedLiteral(value).slice(1, -1);
}

function needsNoEscape(value: string): boolean {
  return value.length <= SCAN_LIMIT ? isPlainAscii(value) : !NEEDS_JSON_ESCAPE.test(value);
}

function escapedLiteral(value: string): string {
  const literal = JSON.stringify(value);
  return RAW_IN_JSON.test(literal) ? literal.replace(RAW_IN_JSON_ALL, unicodeEscape) : literal;
}

/**
 * `JSON.stringify(value)` with DEL, the C1 controls and U+2028/U+2029 escaped too (see jsonString);
 * undefined when the value has no JSON form (undefined, a function) or cannot have one (a cycle, a BigInt).
 */
export function jsonText(value: unknown): string | undefined {
  let literal: string | undefined;
  try {
    literal = JSON.stringify(value);
  } catch {
    return undefined;
  }
  return literal !== undefined && RAW_IN_JSON.test(literal) ? literal.replace(RAW_IN_JSON_ALL, unicodeEscape) : literal;
}

let textSecond = Number.NaN;
let textStamp = "";
let isoMillis = Number.NaN;
let isoStamp = "";
let isoSecond = Number.NaN;
let isoSecondStamp = "";

/** `YYYY-MM-DD HH:MM:SS` in UTC, rebuilt only when the second changes. */
export function textTime(now: number): string {
  const second = Math.floor(now / 1000);
  if (second !== textSecond) {
    const iso = new Date(second * 1000).toISOString();
    textStamp = iso.slice(0, 10) + " " + iso.slice(11, 19);
    textSecond = second;
  }
  return textStamp;
}

/**
 * `Date#toISOString()` of `now`, rebuilt only when the millisecond changes, and then from the
 * second's `YYYY-MM-DDTHH:MM:SS.` cached: toISOString() formats through snprintf, a cost a busy
 * server would otherwise pay every millisecond.
 */
export function isoTime(now: number): string {
  if (now !== isoMillis) {
    const second = Math.floor(now / 1000);
    if (second !== isoSecond) {
      const iso = new Date(second * 1000).toISOString();
      isoSecondStamp = iso.length === 24 ? iso.slice(0, 20) : "";
      isoSecond = second;
    }
    const millis = now - second * 1000;
    // Years outside 0000–9999 have a longer form, and a fraction of a millisecond has no place here.
    isoStamp = isoSecondStamp !== "" && Number.isInteger(millis)
      ? isoSecondStamp + (millis < 10 ? "00" : millis < 100 ? "0" : "") + millis + "Z"
      : new Date(now).toISOString();
    isoMillis = now;
  }
  return isoStamp;
}

// Every control character (C0, DEL, C1) and the Unicode line/paragraph separators: a line break
// would let a value forge a second log line, ESC and CSI drive the reader's terminal.
// oxlint-disable-next-line no-control-regex -- finding control characters is the point
const CONTROL = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/;
// oxlint-disable-next-line no-control-regex -- as above
const CONTROLS = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/g;
const SHORT_ESCAPES: Readonly<Record<string, string>> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function textEscape(c: string): string {
  const code = c.charCodeAt(0);
  return SHORT_ESCAPES[c] ?? (code > 0xff ? unicodeEscape(c) : "\\x" + code.toString(16).padStart(2, "0"));
}

/**
 * Keeps a text-format entry on one line and free of terminal escapes: `\n`, `\r`, `\t` become
 * `\\n`, `\\r`, `\\t`; other controls `\\x1b`-style; U+2028/U+2029 `\\u2028`/`\\u2029`.
 */
export function escapeText(text: string): string {
  return CONTROL.test(text) ? text.replace(CONTROLS, textEscape) : text;
}
