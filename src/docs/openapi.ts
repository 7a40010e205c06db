import type { OpenAPISecurityScheme } from "../http/middleware-contract.js";
import { joinPath } from "../http/path.js";
import type { RegisteredRoute } from "../http/route.js";
import { BUILTIN_SCHEMAS, HEALTH_SCHEMA, errorComponents, healthOperation, isHealthOperation, isHealthRoute } from "./builtins.js";
import { SchemaCollector } from "./components.js";
import { routeOperation, toOpenAPIPath, type OperationContext } from "./operation.js";
import type {
  DocsConfig, OpenAPIDocument, OpenAPIMethod, OpenAPIOperation, OpenAPIPathItem,
} from "./types.js";

/**
 * What the document's `info`, `servers`, `tags` and security schemes come from: an App's
 * `config.docs`. `shedsLoad` (set by the App when `loadShedding` is on) lists the 503 of load
 * shedding on every operation but GET /health, which is never shed.
 */
export type OpenAPIDocsConfig = DocsConfig & { title: string; version: string; shedsLoad?: boolean };

/** The description of the `health` tag of GET /health, unless `docs.tags` describes it. */
const HEALTH_TAG_DESCRIPTION = "Liveness and readiness of the service";

/** File name of the Scalar bundle under the docs path. */
export const SCALAR_SCRIPT = "scalar.js";

/** The docs routes themselves: `{path}`, `{path}/openapi.json` and `{path}/scalar.js`. */
export function docsPaths(path: string): { page: string; document: string; script: string } {
  return { page: joinPath(path, ""), document: joinPath(path, "openapi.json"), script: joinPath(path, SCALAR_SCRIPT) };
}

/** `"https://api.example.com - production"` → `{ url, description }`; the description is optional. */
export function parseServer(entry: string): { url: string; description?: string } {
  const at = entry.indexOf(" - ");
  const url = (at < 0 ? entry : entry.slice(0, at)).trim();
  const description = at < 0 ? "" : entry.slice(at + 3).trim();
  return description ? { url, description } : { url };
}

/** Schemes a route may name without declaring them in `docs.securitySchemes`. */
function defaultScheme(name: string): OpenAPISecurityScheme {
  if (name === "bearer") return { type: "http", scheme: "bearer" };
  if (name === "basic") return { type: "http", scheme: "basic" };
  return { type: "http", scheme: "bearer", description: `Not declared in docs.securitySchemes: documented as a bearer token` };
}

function infoOf(docs: OpenAPIDocsConfig): OpenAPIDocument["info"] {
  const info: OpenAPIDocument["info"] = { title: docs.title, version: docs.version };
  if (docs.description) info.description = docs.description;
  if (docs.contact) info.contact = Object.fromEntries(Object.entries(docs.contact).filter(([, v]) => v !== undefined && v !== ""));
  if (docs.license) info.license = docs.license.url ? { name: docs.license.name, url: docs.license.url } : { name: docs.license.name };
  return info;
}

interface Entry {
  readonly path: string;
  readonly method: OpenAPIMethod;
  readonly operation: OpenAPIOperation;
  readonly explicitId: boolean;
}

/** One entry per (method, path), in registration order; the first registration of a pair wins, as in h3. */
function collectEntries(routes: readonly RegisteredRoute[], ctx: OperationContext): Entry[] {
  const seen = new Set<string>();
  const entries: Entry[] = [];
  for (const { method, path, route, middleware, appMiddleware = [] } of routes) {
    const key = `${method} ${path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (route.options.hidden) continue;
    const health = isHealthRoute(route);
    const operation = health ? healthOperation() : routeOperation(route, path, ctx, [...appMiddleware, ...middleware]);
    entries.push({
      path: toOpenAPIPath(path).path, method: method.toLowerCase() as OpenAPIMethod, operation, explicitId: !health && route.options.operationId !== undefined,
    });
  }
  return entries;
}

/** Explicit operationIds are kept; derived ones (and repeated explicit ones) get a numeric suffix. */
function assignOperationIds(entries: readonly Entry[]): void {
  const taken = new Set<string>();
  const claim = (entry: Entry) => {
    const base = entry.operation.operationId;
    let id = base;
    for (let n = 2; taken.has(id); n++) id = `${base}${n}`;
    taken.add(id);
    entry.operation.operationId = id;
  };
  for (const entry of entries) if (entry.explicitId) claim(entry);
  for (const entry of entries) if (!entry.explicitId) claim(entry);
}

/**
 * Builds an OpenAPI 3.1 document: `info`, `servers`, `tags` and security schemes from `docs`, one
 * operation per route of `routes` (hidden routes, such as the docs routes, left out), shared
 * schemas in `components.schemas`, keelson's error responses in `components.responses`. Given an
 * App's `routes` and `config.docs`, it is the document the App serves; routes added on
 * `app.httpEngine` directly are not in `app.routes`, so not in the document.
 *
 * @example
 * const app = buildApp();
 * writeFileSync("openapi.json", JSON.stringify(buildOpenAPIDocument(app.routes, app.config.docs), null, 2));
 */
export function buildOpenAPIDocument(routes: readonly RegisteredRoute[], docs: OpenAPIDocsConfig): OpenAPIDocument {
  const reserved = { ...BUILTIN_SCHEMAS };
  if (!routes.some(({ route }) => isHealthRoute(route))) delete reserved[HEALTH_SCHEMA];
  const ctx: OperationContext = {
    schemas: new SchemaCollector(reserved), usedErrors: new Set(), securitySchemes: new Map(), shedsLoad: docs.shedsLoad === true,
  };
  const entries = collectEntries(routes, ctx);
  assignOperationIds(entries);

  const paths: Record<string, OpenAPIPathItem> = {};
  const tags = new Map((docs.tags ?? []).map((t) => [t.name, t.description ? { name: t.name, description: t.description } : { name: t.name }]));
  const securitySchemes: Record<string, OpenAPISecurityScheme> = { ...docs.securitySchemes };
  for (const [name, scheme] of ctx.securitySchemes) securitySchemes[name] ??= scheme;
  for (const { path, method, operation } of entries) {
    (paths[path] ??= {})[method] = operation;
    for (const tag of operation.tags ?? []) {
      if (!tags.has(tag)) tags.set(tag, tag === "health" && isHealthOperation(operation) ? { name: tag, description: HEALTH_TAG_DESCRIPTION } : { name: tag });
    }
    for (const requirement of operation.security ?? []) {
      for (const name of Object.keys(requirement)) securitySchemes[name] ??= defaultScheme(name);
    }
  }

  // Once any operation requires a credential, the public ones say so (`security: []`) rather than
  // leaving readers and linters to guess.
  if (Object.keys(securitySchemes).length > 0) {
    for (const { operation } of entries) operation.security ??= [];
  }

  const document: OpenAPIDocument = {
    openapi: "3.1.0",
    info: infoOf(docs),
    paths,
    components: { schemas: ctx.schemas.finalize() },
  };
  // Without `docs.servers`, the server is the one serving the document: OpenAPI's own default, written out.
  document.servers = docs.servers?.length ? docs.servers.map(parseServer) : [{ url: "/", description: "The server this document is served from" }];
  if (tags.size > 0) document.tags = [...tags.values()];
  const responses = errorComponents(ctx.usedErrors);
  if (Object.keys(responses).length > 0) document.components.responses = responses;
  if (Object.keys(securitySchemes).length > 0) document.components.securitySchemes = securitySchemes;
  // Key order as readers expect it: info, servers, tags, paths, components.
  const { openapi, info, servers, tags: tagList, components } = document;
  return { openapi, info, ...(servers && { servers }), ...(tagList && { tags: tagList }), paths, components };
}
