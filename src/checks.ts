/**
 * The checks every numeric and enumerated option goes through when an App, a Supervisor or an
 * integration is made: one wording for all of them (`<name> must be <rule>, got <value>`), so a
 * `Number(undefined)` (NaN), an `Infinity` or a typo is refused where it was written, with its
 * name, instead of meaning "no limit" or "no budget" later.
 */

/** The longest delay `setTimeout` honours: a longer one overflows and fires after 1 ms. */
export const MAX_TIMER_MS = 2_147_483_647;

/** What a numeric option accepts. */
export interface NumberRule {
  /** Whole numbers only. */
  integer?: boolean;
  /** Smallest accepted value (inclusive). */
  min?: number;
  /** Values must be strictly above this. */
  above?: number;
  /** Largest accepted value (inclusive). */
  max?: number;
}

/** A TCP port; 0 asks the system for a free one. */
export const PORT_RULE: NumberRule = { integer: true, min: 0, max: 65_535 };

/** The port an App listens on when neither its port variable nor its `port` option says; a supervisor's too. */
export const DEFAULT_PORT = 3000;

/** The same rule for a time in milliseconds: finite, at most MAX_TIMER_MS. */
export const MS_ABOVE_0: NumberRule = { above: 0, max: MAX_TIMER_MS };
export const MS_FROM_0: NumberRule = { min: 0, max: MAX_TIMER_MS };

function describeRule(rule: NumberRule): string {
  const kind = rule.integer ? "an integer" : "a number";
  if (rule.above === undefined && rule.min !== undefined && rule.max !== undefined) return `${kind} from ${rule.min} to ${rule.max}`;
  const bounds: string[] = [];
  if (rule.above !== undefined) bounds.push(`above ${rule.above}`);
  if (rule.min !== undefined) bounds.push(`>= ${rule.min}`);
  if (rule.max !== undefined) bounds.push(`at most ${rule.max}`);
  return bounds.length === 0 ? kind : `${kind} ${bounds.join(" and ")}`;
}

/** `"abc"` for strings (so an empty or padded value shows), else String(value). */
export function show(value: unknown): string {
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

function fits(value: number, rule: NumberRule): boolean {
  if (!Number.isFinite(value)) return false;
  if (rule.integer && !Number.isInteger(value)) return false;
  if (rule.min !== undefined && value < rule.min) return false;
  if (rule.above !== undefined && value <= rule.above) return false;
  return rule.max === undefined || value <= rule.max;
}

/** `value` if it is a number that fits `rule`; else throws `<name> must be …, got <value>`. */
export function checkNumber(value: unknown, name: string, rule: NumberRule): number {
  if (typeof value !== "number" || !fits(value, rule)) throw new Error(`${name} must be ${describeRule(rule)}, got ${show(value)}`);
  return value;
}

/** checkNumber, with `undefined` (the option left out) passed through. */
export function checkOptionalNumber(value: unknown, name: string, rule: NumberRule): number | undefined {
  return value === undefined ? undefined : checkNumber(value, name, rule);
}

/** `value` if it is one of `allowed`; else throws `<name> must be "a", "b" or "c", got <value>`. */
export function checkOneOf<T extends string>(value: unknown, name: string, allowed: readonly T[]): T {
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) return value as T;
  const list = allowed.map((item) => JSON.stringify(item));
  const spelled = list.length > 1 ? `${list.slice(0, -1).join(", ")} or ${list.at(-1)}` : list.join("");
  throw new Error(`${name} must be ${spelled}, got ${show(value)}`);
}

/** A listen address: an IPv4 or IPv6 address, or a host name; not a URL, not `host:port`. */
const HOST_PATTERN = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|(?:[0-9A-Fa-f.]*:){2,}[0-9A-Fa-f.]*(?:%[\w.-]+)?)$/;

/**
 * `value` if it is a listen address (`127.0.0.1`, `::`, `localhost`); undefined stays undefined
 * (every interface); else throws `<name> must be an IP address or a host name, got <value>`.
 *
 * @example
 * const host = checkHost(process.env.ADMIN_HOST?.trim() || undefined, "ADMIN_HOST");
 */
export function checkHost(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string" && HOST_PATTERN.test(value)) return value;
  throw new Error(`${name} must be an IP address or a host name (such as 127.0.0.1, :: or localhost), got ${show(value)}`);
}

/**
 * A number from the environment variable `name`: undefined when it is unset or blank, else the
 * number, checked against `rule`; anything else throws with the variable's name and its text
 * (`KEELSON_SHUTDOWN_TIMEOUT_MS must be an integer >= 0, got "ten"`), never a silent NaN. Only
 * plain decimal notation is read (`Number()` alone would also take "0x10" and "1e3").
 *
 * @example
 * const app = new App({ shutdownTimeout: envNumber("SHUTDOWN_TIMEOUT_MS", { integer: true, above: 0 }) ?? 10_000 });
 */
export function envNumber(name: string, rule: NumberRule = {}, env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === "" ? undefined : parseNumber(raw, name, rule);
}

/** A number written as text (a variable, a command-line flag) in plain decimal notation that fits `rule`; else throws naming `name` and quoting `raw`. */
export function parseNumber(raw: string, name: string, rule: NumberRule): number {
  const value = numberFromText(raw, rule);
  if (value === undefined) throw new Error(`${name} must be ${describeRule(rule)}, got ${show(raw)}`);
  return value;
}

/**
 * `raw` read in plain decimal notation when it fits `rule`, else undefined: parseNumber for a caller
 * that words its own refusal (`--port expects …`).
 *
 * @example
 * const port = numberFromText(flag, PORT_RULE) ?? fail(`--port expects an integer from 0 to 65535, got "${flag}"`);
 */
export function numberFromText(raw: string, rule: NumberRule): number | undefined {
  const value = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)\s*$/.test(raw) ? Number(raw) : Number.NaN;
  return fits(value, rule) ? value : undefined;
}

/**
 * The port the environment variable `name` sets: undefined when it is unset or blank, else an
 * integer that fits PORT_RULE, or it throws naming the variable. The one reader of `PORT`, for the
 * App, the supervisor and the CLI alike, so a value one of them refuses none of them takes.
 *
 * @example
 * const port = readPortEnv() ?? DEFAULT_PORT;
 */
export function readPortEnv(env: NodeJS.ProcessEnv = process.env, name = "PORT"): number | undefined {
  return envNumber(name, PORT_RULE, env);
}
