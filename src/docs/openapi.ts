import type { App, RegisteredRoute } from "../app.js";
import type { DocsConfig } from "../config.js";
import { joinPath } from "../group.js";
import { BUILTIN_SCHEMAS, HEALTH_SCHEMA, errorComponents, healthOperation } from "./builtins.js";
import { SchemaCollector } from "./components.js";
import { routeOperation, toOpenAPIPath, undocumentedOperation, type OperationContext } from "./operation.js";
import type {
  OpenAPIDocument, OpenAPIMethod, OpenAPIOperation, OpenAPIPathItem, OpenAPISecurityScheme,
} from "./types.js";

const METHODS = new Set<string>(["get", "put", "post", "delete", "options", "head", "patch", "trace"]);
/** What an h3 route registered for every method (`app.httpEngine.all`) is listed under. */
const ANY_METHOD: readonly OpenAPIMethod[] = ["get", "post", "put", "patch", "delete"];

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

function infoOf(docs: DocsConfig, serviceName: string, version: string): OpenAPIDocument["info"] {
  const info: OpenAPIDocument["info"] = { title: docs.title ?? serviceName, version };
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

/** Collects one entry per (method, path), in registration order, from every route h3 knows. */
function collectEntries(app: App, ctx: OperationContext): Entry[] {
  const { env, docs, disableHealth } = app.config;
  const declared = new Map<string, RegisteredRoute>(app.routes.map((r) => [`${r.method} ${r.path}`, r]));
  const own = docsPaths(docs.path);
  const skip = new Set(["OPTIONS /**"]);
  if (env !== "production") for (const path of Object.values(own)) skip.add(`GET ${path}`);
  const entries: Entry[] = [];
  const add = (path: string, method: OpenAPIMethod, operation: OpenAPIOperation, explicitId = false) => {
    entries.push({ path: toOpenAPIPath(path).path, method, operation, explicitId });
  };
  for (const route of app.httpEngine["~routes"]) {
    const method = (route.method ?? "").toUpperCase();
    const path = route.route ?? "/";
    const key = `${method} ${path}`;
    if (skip.has(key)) continue;
    skip.add(key);
    const registered = declared.get(key);
    if (registered) {
      const { options } = registered.route;
      if (!options.hidden) add(path, method.toLowerCase() as OpenAPIMethod, routeOperation(registered.route, path, ctx), options.operationId !== undefined);
    } else if (key === "GET /health" && !disableHealth) {
      add(path, "get", healthOperation());
    } else {
      const methods = method === "" ? ANY_METHOD : [method.toLowerCase()].filter((m): m is OpenAPIMethod => METHODS.has(m));
      for (const m of methods) add(path, m, undocumentedOperation(m, path));
    }
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
 * Builds the OpenAPI 3.1 document of an App: `info`, `servers` and `tags` from `docs`, one
 * operation per registered route (GET /health included; routes added directly on
 * `app.httpEngine` as undocumented operations; hidden routes and the docs routes left out),
 * shared schemas in `components.schemas`, keelson's error responses in `components.responses`.
 */
export function buildOpenAPIDocument(app: App): OpenAPIDocument {
  const { docs, serviceName } = app.config;
  const reserved = { ...BUILTIN_SCHEMAS };
  if (app.config.disableHealth) delete reserved[HEALTH_SCHEMA];
  const ctx: OperationContext = { schemas: new SchemaCollector(reserved), usedErrors: new Set() };
  const entries = collectEntries(app, ctx);
  assignOperationIds(entries);

  const paths: Record<string, OpenAPIPathItem> = {};
  const tags = new Map((docs.tags ?? []).map((t) => [t.name, t.description ? { name: t.name, description: t.description } : { name: t.name }]));
  const securitySchemes: Record<string, OpenAPISecurityScheme> = { ...docs.securitySchemes };
  for (const { path, method, operation } of entries) {
    (paths[path] ??= {})[method] = operation;
    for (const tag of operation.tags ?? []) if (!tags.has(tag)) tags.set(tag, { name: tag });
    for (const requirement of operation.security ?? []) {
      for (const name of Object.keys(requirement)) securitySchemes[name] ??= defaultScheme(name);
    }
  }

  const document: OpenAPIDocument = {
    openapi: "3.1.0",
    info: infoOf(docs, serviceName, docs.version),
    paths,
    components: { schemas: ctx.schemas.finalize() },
  };
  if (docs.servers?.length) document.servers = docs.servers.map(parseServer);
  if (tags.size > 0) document.tags = [...tags.values()];
  const responses = errorComponents(ctx.usedErrors);
  if (Object.keys(responses).length > 0) document.components.responses = responses;
  if (Object.keys(securitySchemes).length > 0) document.components.securitySchemes = securitySchemes;
  // Key order as readers expect it: info, servers, tags, paths, components.
  const { openapi, info, servers, tags: tagList, components } = document;
  return { openapi, info, ...(servers && { servers }), ...(tagList && { tags: tagList }), paths, components };
}
