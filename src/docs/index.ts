import { JSON_HEADERS } from "../http/headers.js";
import { sharedBody } from "../http/shared-body.js";
import { get, type RegisteredRoute, type Route } from "../http/route.js";
import { acceptsGzip, loadScalarBundle, matchesETag } from "./assets.js";
import { buildOpenAPIDocument, docsPaths, parseServer, type OpenAPIDocsConfig } from "./openapi.js";
import { renderDocsPage, serverOrigin } from "./page.js";

// The bundle URL carries a content hash (`?v=`): a new bundle is a new URL.
const IMMUTABLE = "public, max-age=31536000, immutable";

/**
 * The docs routes, hidden from the document they serve: `GET {docs.path}` (the Scalar page),
 * `GET {docs.path}/openapi.json` (the document of `routes()`) and `GET {docs.path}/scalar.js`
 * (the Scalar bundle, served from keelson's own build output). The document is built on first
 * request and rebuilt when routes have been added since; the bundle is read on first request and kept.
 */
export function defineDocsRoutes(docs: OpenAPIDocsConfig & { path: string }, routes: () => readonly RegisteredRoute[]): Route[] {
  const paths = docsPaths(docs.path);
  let document: { count: number; json: Uint8Array<ArrayBuffer> } | undefined;
  let page: { html: string; headers: Record<string, string> } | undefined;

  const documentRoute = get(paths.document, () => {
    const all = routes();
    if (document?.count !== all.length) document = { count: all.length, json: Buffer.from(JSON.stringify(buildOpenAPIDocument(all, docs))) };
    return sharedBody(document.json, { ...JSON_HEADERS, "cache-control": "no-cache" });
  });

  const pageRoute = get(paths.page, async () => {
    if (page === undefined) {
      const connect = (docs.servers ?? []).map((entry) => serverOrigin(parseServer(entry).url));
      const rendered = renderDocsPage(docs.title, (await loadScalarBundle()).version, paths.document, connect.filter((o) => o !== undefined));
      page = { html: rendered.html, headers: { ...rendered.headers, "content-type": "text/html;charset=UTF-8", "cache-control": "no-cache" } };
    }
    return new Response(page.html, { headers: page.headers });
  });

  const scriptRoute = get(paths.script, async (ctx) => {
    const bundle = await loadScalarBundle();
    const headers: Record<string, string> = {
      "content-type": "text/javascript;charset=UTF-8", "cache-control": IMMUTABLE, etag: bundle.etag, vary: "accept-encoding",
      "x-content-type-options": "nosniff",
    };
    const request = ctx.event.req;
    if (matchesETag(request.headers.get("if-none-match"), bundle.etag)) return new Response(null, { status: 304, headers });
    const gzip = acceptsGzip(request.headers.get("accept-encoding"));
    if (gzip) headers["content-encoding"] = "gzip";
    return sharedBody(gzip ? bundle.gzipped : bundle.body, headers);
  });

  // In the order they were always registered: the document, the page, the bundle.
  return [documentRoute, pageRoute, scriptRoute].map((route) => route.hide());
}

export { buildOpenAPIDocument } from "./openapi.js";
export type * from "./types.js";
