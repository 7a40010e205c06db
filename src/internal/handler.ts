import type { StandardSchemaV1 } from "@standard-schema/spec";
import { getRouterParams, type H3Event } from "h3";
import { HandlerContext, type ContextServices } from "../context.js";
import { noContent } from "../results.js";
import type { Handler, Route } from "../route.js";
import { readJSONBody } from "./body.js";
import { readQuery } from "./query.js";
import { createCoercer, validateInput, type Coercer, type InputPart } from "./validate.js";

type AnyHandler = Handler<unknown, unknown, unknown>;

const EMPTY_PARAMS: Readonly<Record<string, string>> = Object.freeze({});

function toResult(value: unknown): unknown {
  return value === undefined ? noContent() : value;
}

function settle(value: unknown): unknown {
  return value instanceof Promise ? value.then(toResult) : toResult(value);
}

function readParams(event: H3Event): Record<string, string> {
  return event.context.params ? getRouterParams(event, { decode: true }) : (EMPTY_PARAMS as Record<string, string>);
}

async function check(part: InputPart, schema: StandardSchemaV1 | undefined, coerce: Coercer | undefined, raw: unknown): Promise<unknown> {
  if (!schema) return raw;
  const input = coerce ? coerce(raw as Record<string, string | string[]>) : raw;
  return validateInput(part, schema, input);
}

/**
 * Compiles a Route into an h3 handler. Work that depends only on the declaration (schema
 * coercion plans, whether a body is read) happens here once, not per request; a route with no
 * schemas and no body takes a synchronous path that allocates only the context.
 */
export function compileRoute(route: Route, services: ContextServices, bodyLimit: number): (event: H3Event) => unknown {
  const { params: paramsSchema, query: querySchema, body: bodySchema } = route.options;
  const handler = route.handler as unknown as AnyHandler;
  const readsBody = route.method !== "GET";
  const coerceParams = paramsSchema && createCoercer(paramsSchema);
  const coerceQuery = querySchema && createCoercer(querySchema);

  if (!readsBody && !paramsSchema && !querySchema) {
    return function keelsonRoute(event) {
      return settle(handler(new HandlerContext(event, services, readParams(event), undefined, undefined)));
    };
  }

  return async function keelsonValidatedRoute(event) {
    const [params, query, body] = await Promise.all([
      check("params", paramsSchema, coerceParams, readParams(event)),
      querySchema ? check("query", querySchema, coerceQuery, readQuery(event)) : undefined,
      readsBody ? readJSONBody(event, bodyLimit).then((raw) => check("body", bodySchema, undefined, raw)) : undefined,
    ]);
    return settle(handler(new HandlerContext(event, services, params, query, body)));
  };
}
