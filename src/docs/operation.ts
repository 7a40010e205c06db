import { STATUS_CODES } from "node:http";
import type { StandardSchemaV1 } from "@standard-schema/spec";
import { readJSONSchema, resolveLocalRef, type JSONSchema } from "../http/json-schema.js";
import type { Middleware } from "h3";
import { getMiddlewareContract, type MiddlewareContract, type MiddlewareHeaderDoc, type OpenAPISecurityScheme } from "../http/middleware-contract.js";
import type { ResponseDoc, Route } from "../http/route.js";
import { ERROR_RESPONSES, errorResponse } from "./builtins.js";
import type { SchemaCollector } from "./components.js";
import type { OpenAPIOperation, OpenAPIParameter, OpenAPIRef, OpenAPIResponse } from "./types.js";

/** What building operations records for the document: the error responses and the security schemes middleware declared. */
export interface OperationContext {
  readonly schemas: SchemaCollector;
  readonly usedErrors: Set<number>;
  readonly securitySchemes: Map<string, OpenAPISecurityScheme>;
  /** The App sheds load: every operation can answer 503. */
  readonly shedsLoad?: boolean;
}

/** Statuses without a body: a schema given for them documents nothing. */
const EMPTY_STATUSES = new Set([204, 205, 304]);

function pascal(text: string): string {
  return text.split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join("");
}

/**
 * The OpenAPI form of a route path (`/users/:id` → `/users/{id}`) and its parameter names, in
 * order. rou3's wildcards become parameters under the names h3 gives them: `**:rest` → `{rest}`,
 * `**` → `{_}`, `*` → `{0}`, `{1}`…
 */
export function toOpenAPIPath(path: string): { path: string; params: string[] } {
  const params: string[] = [];
  let unnamed = 0;
  const converted = path.split("/").map((segment) => {
    let name: string | undefined;
    if (segment === "**") name = "_";
    else if (segment.startsWith("**:")) name = segment.slice(3);
    else if (segment === "*") name = String(unnamed++);
    if (name !== undefined) {
      params.push(name);
      return `{${name}}`;
    }
    return segment.replace(/:(\w+)[?+*]?/g, (_, param: string) => {
      params.push(param);
      return `{${param}}`;
    });
  });
  return { path: converted.join("/"), params };
}

/** `GET /books/:id` → `getBooksById`; `DELETE /` → `deleteRoot`. Uniqueness is the caller's job. */
export function deriveOperationId(method: string, path: string): string {
  const words: string[] = [];
  for (const segment of path.split("/")) {
    if (segment === "") continue;
    if (segment.startsWith("**")) words.push("By", pascal(segment.slice(3)) || "Rest");
    else if (segment === "*") words.push("ByAny");
    else for (const part of segment.split(/(:\w+[?+*]?)/)) words.push(part.startsWith(":") ? `By${pascal(part)}` : pascal(part));
  }
  return method.toLowerCase() + (words.join("") || "Root");
}

function isSchema(value: StandardSchemaV1 | ResponseDoc): value is StandardSchemaV1 {
  return "~standard" in value;
}

/** True when the schema accepts a missing value, i.e. the request body is optional. */
function acceptsUndefined(schema: StandardSchemaV1): boolean {
  try {
    const result = schema["~standard"].validate(undefined);
    if (result instanceof Promise) {
      result.catch(() => undefined);
      return false;
    }
    return !result.issues;
  } catch {
    return false;
  }
}

/** The properties of an object schema, each ready to be a parameter. */
function objectParameters(schema: StandardSchemaV1, where: "path" | "query", ctx: OperationContext, hint: string): OpenAPIParameter[] {
  const json = readJSONSchema(schema, "input");
  if (!json) return [];
  const object = resolveLocalRef(json, json) as { properties?: Record<string, JSONSchema>; required?: string[] };
  const required = new Set(object.required ?? []);
  const defs = (json.$defs ?? {}) as Record<string, JSONSchema>;
  return Object.entries(object.properties ?? {}).map(([name, node]) => {
    const { description, deprecated, ...rest } = ctx.schemas.addJSON({ ...node }, "input", hint + pascal(name), defs);
    const parameter: OpenAPIParameter = { name, in: where, required: where === "path" || required.has(name), schema: rest };
    if (typeof description === "string") parameter.description = description;
    if (deprecated === true) parameter.deprecated = true;
    return parameter;
  });
}

function parametersOf(route: Route, pathParams: string[], ctx: OperationContext, id: string): OpenAPIParameter[] {
  const { params, query } = route.options;
  const declared = params ? objectParameters(params, "path", ctx, `${id}Param`) : [];
  // Every template parameter is documented, schema or not; schema keys not in the path are not.
  const path = pathParams.map((name) => declared.find((p) => p.name === name)
    ?? { name, in: "path" as const, required: true, schema: { type: "string" } });
  return [...path, ...(query ? objectParameters(query, "query", ctx, `${id}Query`) : [])];
}

/** The request headers middleware reads (`Idempotency-Key`), as header parameters. */
function headerParameters(contracts: readonly MiddlewareContract[]): OpenAPIParameter[] {
  const parameters: OpenAPIParameter[] = [];
  for (const contract of contracts) {
    for (const [name, doc] of Object.entries(contract.requestHeaders ?? {})) {
      parameters.push({ name, in: "header", required: doc.required === true, description: doc.description, schema: doc.schema ?? { type: "string" } });
    }
  }
  return parameters;
}

function declaredResponse(status: number, doc: ResponseDoc, ctx: OperationContext, id: string): OpenAPIResponse | OpenAPIRef {
  const known = ERROR_RESPONSES.get(status);
  if (!doc.schema && status >= 400) {
    if (known && doc.description === undefined) {
      ctx.usedErrors.add(status);
      return { $ref: `#/components/responses/${known.component}` };
    }
    return errorResponse(status, doc.description ?? STATUS_CODES[status] ?? "Error", known?.code);
  }
  const response: OpenAPIResponse = { description: doc.description ?? STATUS_CODES[status] ?? "Response" };
  if (doc.contentType !== undefined && !EMPTY_STATUSES.has(status)) {
    const declared = doc.schema ? ctx.schemas.add(doc.schema, "output", `${id}Response${status}`) ?? {} : undefined;
    // Without a schema: text (an event stream, CSV) is a string, anything else binary.
    const schemaOf = (type: string) => declared ?? (type.startsWith("text/") ? { type: "string" } : { type: "string", format: "binary" });
    response.content = Object.fromEntries((Array.isArray(doc.contentType) ? doc.contentType : [doc.contentType]).map((type) => [type, { schema: schemaOf(type) }]));
  } else if (doc.schema && !EMPTY_STATUSES.has(status)) {
    response.content = { "application/json": { schema: ctx.schemas.add(doc.schema, "output", `${id}Response${status}`) ?? {} } };
  }
  return response;
}

/** The 503 of load shedding (the App's `loadShedding`), answered before routing. */
const SHED_RESPONSE = (): OpenAPIResponse => ({
  ...errorResponse(503, "The service is overloaded (load shedding): retry after Retry-After", "SERVICE_UNAVAILABLE"),
  headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer", minimum: 1 } } },
});

function headersOf(docs: Readonly<Record<string, MiddlewareHeaderDoc>>): NonNullable<OpenAPIResponse["headers"]> {
  const out: NonNullable<OpenAPIResponse["headers"]> = {};
  for (const [name, doc] of Object.entries(docs)) out[name] = { description: doc.description, schema: doc.schema ?? { type: "string" } };
  return out;
}

function responsesOf(route: Route, hasPathParams: boolean, contracts: readonly MiddlewareContract[], ctx: OperationContext, id: string): OpenAPIOperation["responses"] {
  const { params, query, body, security, responses = {} } = route.options;
  const out: OpenAPIOperation["responses"] = {};
  for (const [key, value] of Object.entries(responses)) {
    out[key] = declaredResponse(Number(key), isSchema(value) ? { schema: value } : value, ctx, id);
  }
  // Without a declared success: a DELETE handler returns nothing (204), any other returns a value (200).
  if (!Object.keys(out).some((status) => Number(status) < 400)) {
    if (route.method === "DELETE") out["204"] = { description: "No Content" };
    else out["200"] = { description: "OK" };
  }
  // What the route's middleware answers by itself, and the headers it adds to what it lets through.
  for (const contract of contracts) {
    for (const [key, doc] of Object.entries(contract.responses ?? {})) {
      if (out[key] !== undefined) continue;
      const status = Number(key);
      const known = ERROR_RESPONSES.get(status);
      const response = errorResponse(status, doc.description ?? known?.description ?? STATUS_CODES[status] ?? "Error", doc.code ?? known?.code);
      if (doc.headers) response.headers = headersOf(doc.headers);
      out[key] = response;
    }
    if (contract.headers) {
      for (const [key, response] of Object.entries(out)) {
        if (Number(key) < 400 && !("$ref" in response)) response.headers = { ...response.headers, ...headersOf(contract.headers) };
      }
    }
  }
  // What keelson itself can answer for this route, unless the route documents it otherwise.
  const automatic = [500];
  if (route.method !== "GET") automatic.push(400, 413, 415);
  if (params || query || body) automatic.push(422);
  if (hasPathParams) automatic.push(404);
  if (security?.length) automatic.push(401);
  for (const status of automatic.toSorted((a, b) => a - b)) {
    if (out[status] !== undefined) continue;
    ctx.usedErrors.add(status);
    out[status] = { $ref: `#/components/responses/${ERROR_RESPONSES.get(status)!.component}` };
  }
  if (ctx.shedsLoad && out["503"] === undefined) out["503"] = SHED_RESPONSE();
  return out;
}

/**
 * The security requirement: the credentials the route's middleware checks (all of them, with the
 * scopes each requires) together with the schemes the route names with `secured()`; without
 * middleware that checks one, each named scheme is an alternative, as before.
 */
function securityOf(named: readonly string[] | undefined, contracts: readonly MiddlewareContract[], ctx: OperationContext): OpenAPIOperation["security"] {
  const checked = contracts.flatMap((c) => (c.security ? [c.security] : []));
  if (checked.length === 0) return named?.length ? named.map((name) => ({ [name]: [] })) : undefined;
  const requirement: Record<string, string[]> = {};
  for (const { name, scheme, scopes } of checked) {
    if (!ctx.securitySchemes.has(name)) ctx.securitySchemes.set(name, scheme);
    requirement[name] = [...new Set([...(requirement[name] ?? []), ...(scopes ?? [])])];
  }
  for (const name of named ?? []) requirement[name] ??= [];
  return [requirement];
}

/** The operation of a route declared through keelson, with every schema and option it carries. */
export function routeOperation(route: Route, path: string, ctx: OperationContext, middleware: readonly Middleware[] = []): OpenAPIOperation {
  const o = route.options;
  const contracts = middleware.map(getMiddlewareContract)
    .filter((c): c is MiddlewareContract => c !== undefined && (c.methods === undefined || c.methods.includes(route.method)));
  const id = o.operationId ?? deriveOperationId(route.method, path);
  const { params } = toOpenAPIPath(path);
  const parameters = [...parametersOf(route, params, ctx, id), ...headerParameters(contracts)];
  const operation: Partial<OpenAPIOperation> = { operationId: id };
  if (o.summary) operation.summary = o.summary;
  if (o.description) operation.description = o.description;
  if (o.tags?.length) operation.tags = [...new Set(o.tags)];
  if (o.deprecated) operation.deprecated = true;
  const security = securityOf(o.security, contracts, ctx);
  if (security) operation.security = security;
  if (parameters.length > 0) operation.parameters = parameters;
  if (o.body) {
    const schema = ctx.schemas.add(o.body, "input", `${id}Body`) ?? {};
    const media = o.bodyType === "form" ? ["multipart/form-data", "application/x-www-form-urlencoded"] : ["application/json"];
    operation.requestBody = { required: !acceptsUndefined(o.body), content: Object.fromEntries(media.map((type) => [type, { schema }])) };
  }
  return { ...operation, operationId: id, responses: responsesOf(route, params.length > 0, contracts, ctx, id) };
}
