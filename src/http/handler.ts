import type { StandardSchemaV1 } from "@standard-schema/spec";
import { getRouterParams, HTTPResponse, type H3Event } from "h3";
import { HandlerContext, type ContextServices } from "./context.js";
import { jsonText, JSONValueResponse, noContent } from "./results.js";
import { responseSerializers, type ResponseSerializers } from "./response-schema.js";
import type { Handler, Route } from "./route.js";
import { readJSONBody, readLaneJSONBody } from "./body.js";
import { readFormBody, resolveFormLimits, type ReadForm } from "./form.js";
import { readQuery } from "./query.js";
import { noteStreamedBody } from "./long-response.js";
import type { IncomingMessage } from "node:http";
import { RequestState, type Lane } from "./request-state.js";
import { createCoercer, validateInput, type Coercer, type InputPart } from "./validate.js";

type AnyHandler = Handler<unknown, unknown, unknown>;

const EMPTY_PARAMS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * What h3 would serialize as JSON itself (its isJSONSerializable, minus null and bigint, which it
 * does not send as JSON text): such values become a JSON response with json()'s headers.
 */
function isJSONValue(value: unknown): value is object | number | boolean {
  const type = typeof value;
  if (type !== "object") return type === "number" || type === "boolean";
  const object = value as { toJSON?: unknown; pipe?: unknown; pipeTo?: unknown } | null;
  // h3 answers a returned Error as if it were thrown; a KError's toJSON() must not make it a 200.
  if (object === null || object instanceof Error) return false;
  if (typeof object.toJSON === "function" || Array.isArray(object)) return true;
  if (typeof object.pipe === "function" || typeof object.pipeTo === "function") return false;
  const proto = Object.getPrototypeOf(object) as object | null;
  // Plain objects, prototype-free ones (ctx.query) and h3's EmptyObject (router params).
  return proto === Object.prototype || proto === null || Object.getPrototypeOf(proto) === null;
}

/**
 * Where h3 keeps `event.res` once something touched it (`Symbol.for`: shared by every copy of h3);
 * the pipeline's direct write also reads it.
 */
export const EVENT_RES = Symbol.for("h3.internal.event.res");

/**
 * The status the handler set on `event.res` (`setResponseStatus`, `event.res.status = …`), if any.
 * Read through h3's own key rather than `event.res`, whose getter would build the object on every
 * request that never touched it; test/h3-compat-response.test.ts notices if h3 moves it.
 */
function preparedStatus(event: H3Event | undefined): number | undefined {
  return (event as unknown as Record<symbol, { status?: number } | undefined> | undefined)?.[EVENT_RES]?.status || undefined;
}

/**
 * Whose result is settled: an h3 event, or the state of a lane's request (pipeline.ts), which has no
 * event until something asks for one. Nothing could have set a status on an event not made yet.
 */
type Source = H3Event | RequestState;

function madeEvent(source: Source): H3Event | undefined {
  return source instanceof RequestState ? source.madeEvent : source;
}

function eventOf(source: Source): H3Event {
  return source instanceof RequestState ? source.event : source;
}

/**
 * The response of a handler's result. A json()/created() body is written here, inside the route's
 * handling (a value JSON.stringify cannot write fails as the handler would), not when h3 reads it.
 * A status the handler set on `event.res` wins over keelson's defaults (200, 204 for undefined), as
 * it does in h3; a json()/created() response keeps its own, as an h3 HTTPResponse with a status does.
 */
function toResult(value: unknown, source: Source): unknown {
  if (value instanceof JSONValueResponse) return value.written();
  if (value === undefined) {
    // No status here: h3 takes the one the handler set (it answers an empty body with it).
    return preparedStatus(madeEvent(source)) === undefined ? noContent() : new HTTPResponse(null);
  }
  if (isJSONValue(value)) return jsonText(value, JSON.stringify(value), preparedStatus(madeEvent(source)));
  noteStreamedBody(value, eventOf(source));
  return value;
}

function settleAsBefore(value: unknown, event: Source): unknown {
  return value instanceof Promise ? value.then((resolved) => toResult(resolved, event)) : toResult(value, event);
}

/**
 * The result of a route with response schemas: a plain value (200) or a json()/created() response
 * whose status has a schema is written through that schema; anything else as toResult() does.
 */
function shapedResult(serializers: ResponseSerializers): (value: unknown, event: Source) => unknown {
  // A plain value is a 200 unless the handler set a status: its serializer is looked up once per route.
  const ok = serializers(200);
  const shape = (value: unknown, event: Source): unknown => {
    if (value instanceof JSONValueResponse) {
      const serialize = serializers(value.status);
      if (serialize === undefined) return value.written();
      const body = serialize(value.value);
      if (typeof body === "string") {
        value.body = body;
        return value;
      }
      return body.then((text) => {
        value.body = text;
        return value;
      });
    }
    if (value === undefined || !isJSONValue(value)) return toResult(value, event);
    const status = preparedStatus(madeEvent(event));
    const serialize = status === undefined ? ok : serializers(status);
    if (serialize === undefined) return toResult(value, event);
    const body = serialize(value);
    return typeof body === "string" ? jsonText(value, body, status) : body.then((text) => jsonText(value, text, status));
  };
  return (value, event) => (value instanceof Promise ? value.then((resolved) => shape(resolved, event)) : shape(value, event));
}

/** Hands `answer` what a route's continuation settles with: `failed` for a rejection (RequestState.answer). */
function answerLater(answer: NonNullable<RequestState["answer"]>, state: RequestState, outcome: Promise<unknown>): void {
  outcome.then((value) => answer(state, value, false), (error: unknown) => answer(state, error, true));
}

/** A compiled route's way from node's request, for keelson's own listener to serve it without an h3 event. */
export type LaneRun = Lane["run"];

/** The lanes of compiled routes that can take one (`laneOf`): kept beside the functions, not on them. */
const LANES = new WeakMap<object, LaneRun>();

/**
 * The lane of a handler `compileRoute` made, if its route can be served without an h3 event: a JSON
 * or bodiless route without a query schema. Whether it is (no middleware, no wildcard, a path URL
 * parsing keeps as it is) is the pipeline's to decide.
 */
export function laneOf(handler: unknown): LaneRun | undefined {
  return typeof handler === "function" ? LANES.get(handler) : undefined;
}

/** How a route's handler result becomes a response, fixed when the route is compiled. */
export interface ResultOptions {
  /** The route's full path, named in the error line of a response that breaks its schema. */
  readonly path: string;
  /** Also validate what the handler returns against the response schema (all but production). */
  readonly checkResponses: boolean;
}

/**
 * The route's params, percent-decoded by h3's `getRouterParams` when one has a `%`; otherwise the same
 * copy made here, without h3's spread of the router's prototype-free object, which V8 clones on a slow path.
 * A lane's request (a RequestState) has the params h3's router copy found; its event is made only to decode.
 */
function readParams(source: Source): Record<string, string> {
  const params = source instanceof RequestState ? source.laneParams : source.context.params;
  if (!params) return EMPTY_PARAMS as Record<string, string>;
  const copy: Record<string, string> = {};
  for (const key in params) {
    const value: unknown = params[key];
    if (typeof value !== "string" || value.includes("%")) return getRouterParams(eventOf(source), { decode: true });
    copy[key] = value;
  }
  return copy;
}

/** The validated value of one input part (a promise only for async schemas); `raw` without a schema. */
function check(part: InputPart, schema: StandardSchemaV1 | undefined, coerce: Coercer | undefined, raw: unknown): unknown {
  if (!schema) return raw;
  return validateInput(part, schema, coerce ? coerce(raw as Record<string, string | string[]>) : raw);
}

/**
 * A route's coercion plan, built on its first request rather than at registration: it converts the
 * schema to JSON Schema (slow with zod), which a start-up need not pay for routes not yet called.
 */
function lazyCoercer(schema: StandardSchemaV1 | undefined): Coercer | undefined {
  if (!schema) return undefined;
  // undefined: not planned yet; null: the schema describes nothing to coerce.
  let plan: Coercer | null | undefined;
  return function coerce(raw) {
    if (plan === undefined) plan = createCoercer(schema) ?? null;
    return plan === null ? raw : plan(raw);
  };
}

/**
 * Compiles a Route into an h3 handler. Work that depends only on the declaration (schema
 * coercion plans, whether a body is read) happens once, not per request; a route with no
 * schemas and no body takes a synchronous path that allocates only the context.
 */
export function compileRoute(
  route: Route, services: ContextServices, appBodyLimit: number, results: ResultOptions = { path: route.path, checkResponses: true },
): (event: H3Event) => unknown {
  const { params: paramsSchema, query: querySchema, body: bodySchema, bodyType = "json" } = route.options;
  const handler = route.handler as unknown as AnyHandler;
  const serializers = responseSerializers(route, results.path, results.checkResponses);
  const settle = serializers === undefined ? settleAsBefore : shapedResult(serializers);
  const readsBody = route.method !== "GET";
  // Without a body schema, a body that is not JSON is the handler's to read (h3's readers).
  const strictBody = bodySchema !== undefined;
  const coerceParams = lazyCoercer(paramsSchema);
  const coerceQuery = lazyCoercer(querySchema);
  const name = `${route.method} ${route.path}`;
  if (bodyType !== "json" && bodyType !== "form") throw new TypeError(`${name}: bodyType must be "json" or "form", got ${JSON.stringify(bodyType)}`);
  const { bodyLimit: routeLimit } = route.options;
  if (routeLimit !== undefined && (typeof routeLimit !== "number" || !Number.isInteger(routeLimit) || routeLimit < 1)) {
    throw new TypeError(`${name}: bodyLimit must be an integer number of bytes >= 1, got ${String(routeLimit)}`);
  }
  const bodyLimit = routeLimit ?? appBodyLimit;
  const run = (event: H3Event, params: unknown, query: unknown, body: unknown) =>
    settle(handler(new HandlerContext(event, services, params, query, body)), event);

  if (bodyType === "form") {
    const limits = resolveFormLimits(name, route.options.formLimits, bodyLimit);
    const coerceForm = lazyCoercer(bodySchema);
    return function keelsonFormRoute(event) {
      const params = check("params", paramsSchema, coerceParams, readParams(event));
      const query = querySchema ? check("query", querySchema, coerceQuery, readQuery(event)) : undefined;
      const form = readFormBody(event, limits);
      // A params or query schema that rejects settles this before the form is read: its files
      // are removed once it is, or they would stay until the process exits.
      const settled = Promise.all([params, query]).catch((error: unknown) => {
        form.then((read) => read.cleanup(), () => {});
        throw error;
      });
      return Promise.all([settled, form]).then(([[p, q], read]: [[unknown, unknown], ReadForm]) => {
        // Fields arrive as text: the schema's numbers and booleans are coerced as in a query string.
        const handled = (async () => run(event, p, q, await check("body", bodySchema, coerceForm, read.value ?? Object.create(null))))();
        // The files live until the handler is done with them, whatever it answered.
        return handled.finally(read.cleanup);
      });
    };
  }

  // A lane's request (no query schema): the same steps as below, the params from h3's router match.
  const runInLane = (state: RequestState, params: unknown, body: unknown) =>
    settle(handler(new HandlerContext(undefined, services, params, undefined, body, state)), state);
  const withLaneBody = (state: RequestState, params: unknown, raw: unknown): unknown => {
    const body = check("body", bodySchema, undefined, raw);
    return body instanceof Promise ? body.then((b) => runInLane(state, params, b)) : runInLane(state, params, body);
  };
  const lane = querySchema ? undefined : (state: RequestState, req: IncomingMessage): void => {
    const answer = state.answer!;
    let outcome: unknown;
    try {
      // Checked before the body is read, as below: a bad path is answered without waiting for it.
      const params = check("params", paramsSchema, coerceParams, readParams(state));
      if (!readsBody) {
        outcome = params instanceof Promise ? params.then((checked) => runInLane(state, checked, undefined)) : runInLane(state, params, undefined);
      } else if (params instanceof Promise) {
        outcome = Promise.all([params, readLaneJSONBody(req, state, bodyLimit, strictBody)]).then(([checked, raw]) => withLaneBody(state, checked, raw));
      } else {
        // The usual POST: answered from the step that read the body, with no promise after it.
        readLaneJSONBody(req, state, bodyLimit, strictBody).then((raw) => {
          let settled: unknown;
          try {
            settled = withLaneBody(state, params, raw);
          } catch (error) {
            answer(state, error, true);
            return;
          }
          if (settled instanceof Promise) answerLater(answer, state, settled);
          else answer(state, settled, false);
        }, (error: unknown) => answer(state, error, true));
        return;
      }
    } catch (error) {
      answer(state, error, true);
      return;
    }
    if (outcome instanceof Promise) answerLater(answer, state, outcome);
    else answer(state, outcome, false);
  };
  const withLane = <F extends (event: H3Event) => unknown>(compiled: F): F => {
    if (lane !== undefined) LANES.set(compiled, lane);
    return compiled;
  };

  if (!readsBody && !paramsSchema && !querySchema) {
    return withLane(function keelsonRoute(event: H3Event) {
      return settle(handler(new HandlerContext(event, services, readParams(event), undefined, undefined)), event);
    });
  }

  // The body checked, then the handler run: one function for the route, not a closure per request.
  const withBody = (event: H3Event, params: unknown, query: unknown, raw: unknown): unknown => {
    const body = check("body", bodySchema, undefined, raw);
    return body instanceof Promise ? body.then((b) => run(event, params, query, b)) : run(event, params, query, body);
  };

  // Params and query are checked before the body is read: a bad path or query string is
  // answered without waiting for the body, and the usual POST takes one promise, not five.
  return withLane(function keelsonValidatedRoute(event: H3Event): unknown {
    const params = check("params", paramsSchema, coerceParams, readParams(event));
    const query = querySchema ? check("query", querySchema, coerceQuery, readQuery(event)) : undefined;
    if (params instanceof Promise || query instanceof Promise) {
      // Async schemas: every part is awaited together, so no rejection is left unobserved.
      const body = readsBody ? readJSONBody(event, bodyLimit, strictBody).then((raw) => check("body", bodySchema, undefined, raw)) : undefined;
      return Promise.all([params, query, body]).then(([p, q, b]) => run(event, p, q, b));
    }
    if (!readsBody) return run(event, params, query, undefined);
    const state = event.context.keelson;
    const result = readJSONBody(event, bodyLimit, strictBody).then(
      (raw) => {
        // Read when the body is in, after keelson's own listener had the promise below back from h3.
        if (state?.answer === undefined) return withBody(event, params, query, raw);
        const answer = state.answer;
        let outcome: unknown;
        try {
          outcome = withBody(event, params, query, raw);
        } catch (error) {
          answer(state, error, true);
          return undefined;
        }
        if (outcome instanceof Promise) answerLater(answer, state, outcome);
        else answer(state, outcome, false);
        return undefined;
      },
      (error: unknown) => {
        if (state?.answer === undefined) throw error;
        state.answer(state, error, true);
      },
    );
    if (state !== undefined) state.routeResult = result;
    return result;
  });
}
