import { HTTPResponse } from "h3";
import { JSON_HEADERS } from "./headers.js";

function refuse(operation: string, name: string): never {
  throw new TypeError(`the headers of a json()/created() response are shared and frozen (${operation} ${name}); pass extra headers to json()`);
}

/** Headers that refuse changes: one instance is shared by every plain JSON response. */
class FrozenHeaders extends Headers {
  readonly #pairs: readonly (readonly [string, string])[];
  /** The same pairs flat (name, value…), for `frozenHeaderList`. */
  readonly list: readonly string[];

  constructor(init: Record<string, string>) {
    super(init);
    this.#pairs = Object.freeze(Array.from(super.entries(), (pair) => Object.freeze(pair)));
    this.list = Object.freeze(this.#pairs.flat());
  }

  /**
   * The same pairs as Headers#entries(), from an array made once: srvx walks them for every
   * response it writes, and a Headers iterator sorts, checks and allocates on every step.
   */
  override entries(): HeadersIterator<[string, string]> {
    return new PairsIterator(this.#pairs) as unknown as HeadersIterator<[string, string]>;
  }

  override set(name: string): never {
    return refuse("set", name);
  }
  override append(name: string): never {
    return refuse("append", name);
  }
  override delete(name: string): never {
    return refuse("delete", name);
  }
}

/**
 * The iterator of FrozenHeaders#entries(): each step a fresh `[name, value]`, as Headers gives. Not an
 * array's iterator: srvx's loop over the pairs then calls V8's array-iterator builtin for every step
 * and every pair's destructuring, where this `next()` is an ordinary call.
 */
class PairsIterator {
  readonly #pairs: readonly (readonly [string, string])[];
  #index = 0;

  constructor(pairs: readonly (readonly [string, string])[]) {
    this.#pairs = pairs;
  }

  next(): IteratorResult<[string, string], undefined> {
    const index = this.#index;
    const pair = this.#pairs[index];
    if (pair === undefined) return { done: true, value: undefined };
    this.#index = index + 1;
    return { done: false, value: [pair[0], pair[1]] };
  }

  [Symbol.iterator](): this {
    return this;
  }
}
// The iterator helpers (map, filter, toArray…) every built-in iterator has.
Object.setPrototypeOf(PairsIterator.prototype, Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]())) as object);

const SHARED_JSON_HEADERS: Headers = new FrozenHeaders(JSON_HEADERS);

/**
 * The headers of a json()/created() response without extra headers, flat (name, value…, lower-case
 * names, as Headers iterates them), when `headers` is that shared frozen instance; else undefined.
 * They never change, so a reader need not iterate a Headers (which sorts and checks on every step).
 */
export function frozenHeaderList(headers: Headers): readonly string[] | undefined {
  return headers instanceof FrozenHeaders ? headers.list : undefined;
}

/** The body of a JSONValueResponse that nothing has written yet. */
const UNWRITTEN: unique symbol = Symbol("unwritten");

/**
 * A response built by json()/created(). It keeps the value it was built from and writes its body
 * only when asked: a route with a response schema for its status writes that value through the
 * schema (handler.ts), so the value is serialized once, never by JSON.stringify first.
 *
 * h3's HTTPResponse keeps its body in a data field its constructor sets, which a subclass cannot
 * turn into a lazy one (deleting or redefining the field on each instance takes V8 off its fast
 * object path). So this class does not run that constructor: its prototype chain goes through
 * HTTPResponse.prototype (`instanceof HTTPResponse` holds, for h3 and for user code), and it
 * answers the whole of HTTPResponse's public surface itself: `body`, `status`, `statusText`, `headers`.
 */
export class JSONValueResponse {
  readonly value: unknown;
  readonly #status: number;
  readonly #extraHeaders: Record<string, string> | undefined;
  #headers: Headers | undefined;
  #text: string | undefined | typeof UNWRITTEN;

  constructor(value: unknown, status: number, headers?: Record<string, string>, text: string | typeof UNWRITTEN = UNWRITTEN) {
    this.value = value;
    this.#status = status;
    this.#extraHeaders = headers;
    this.#text = text;
  }

  get status(): number {
    return this.#status;
  }

  get statusText(): string | undefined {
    return undefined;
  }

  /**
   * Without extra headers, one frozen instance shared by every such response (h3 does the same
   * for the values it serializes itself); with them, a new Headers, built on first read.
   */
  get headers(): Headers {
    const extra = this.#extraHeaders;
    if (extra === undefined) return SHARED_JSON_HEADERS;
    return this.#headers ??= new Headers({ ...JSON_HEADERS, ...extra });
  }

  /** The JSON text: what a schema wrote, else `JSON.stringify(value)`, computed on first read. */
  get body(): string | undefined {
    const text = this.#text;
    return text === UNWRITTEN ? (this.#text = JSON.stringify(this.value)) : text;
  }

  set body(text: string | undefined) {
    this.#text = text;
  }

  /**
   * This response with its body written now (by JSON.stringify when nothing wrote it): inside the
   * route's own handling, so a value JSON.stringify cannot write fails as the handler would.
   */
  written(): this {
    void this.body;
    return this;
  }
}
Object.setPrototypeOf(JSONValueResponse.prototype, HTTPResponse.prototype);

/** A JSON response whose body is already serialized (`value` is what it was written from). */
export function jsonText(value: unknown, body: string, status = 200, headers?: Record<string, string>): JSONValueResponse {
  return new JSONValueResponse(value, status, headers, body);
}

/**
 * A JSON response with any status and extra headers (always with `X-Content-Type-Options: nosniff`).
 * The body is written once, when the response is sent: through the route's response schema for
 * that status when it has one, else by `JSON.stringify`.
 */
export function json(value: unknown, status = 200, headers?: Record<string, string>): HTTPResponse {
  // What the prototype chain makes it, which TypeScript cannot see through a class that does not `extends`.
  return new JSONValueResponse(value, status, headers) as unknown as HTTPResponse;
}

/** 201 Created with the created value as JSON, and a Location header when given. */
export function created(value: unknown, location?: string): HTTPResponse {
  return json(value, 201, location === undefined ? undefined : { location });
}

/** 204 No Content. A handler that returns `undefined` gets the same. */
export function noContent(): HTTPResponse {
  return new HTTPResponse(null, { status: 204 });
}
