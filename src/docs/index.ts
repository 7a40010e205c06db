import type { H3Event } from "h3";
import type { App } from "../app.js";
import { JSON_HEADERS } from "../internal/headers.js";
import { acceptsGzip, loadScalarBundle, matchesETag } from "./assets.js";
import { buildOpenAPIDocument, docsPaths, parseServer } from "./openapi.js";
import { renderDocsPage, serverOrigin } from "./page.js";

// The bundle URL carries a content hash (`?v=`): a new bundle is a new URL.
const IMMUTABLE = "public, max-age=31536000, immutable";

/**
 * Registers the docs routes on the App's h3 instance: `GET {docs.path}` (the Scalar page),
 * `GET {docs.path}/openapi.json` (the document) and `GET {docs.path}/scalar.js` (the Scalar
 * bundle, served from keelson's own build output). The document is built on first request and
 * rebuilt when routes have been added since; the bundle is read on first request and kept.
 */
export function registerDocs(app: App): void {
  const engine = app.httpEngine;
  const paths = docsPaths(app.config.docs.path);
  const title = app.config.docs.title ?? app.config.serviceName;
  let document: { key: string; json: string } | undefined;
  let page: { html: string; headers: Record<string, string> } | undefined;

  engine.get(paths.document, () => {
    const key = `${engine["~routes"].length}:${app.routes.length}`;
    if (document?.key !== key) document = { key, json: JSON.stringify(buildOpenAPIDocument(app)) };
    return new Response(document.json, { headers: { ...JSON_HEADERS, "cache-control": "no-cache" } });
  });

  engine.get(paths.page, async () => {
    if (page === undefined) {
      const connect = (app.config.docs.servers ?? []).map((entry) => serverOrigin(parseServer(entry).url));
      const rendered = renderDocsPage(title, (await loadScalarBundle()).version, paths.document, connect.filter((o) => o !== undefined));
      page = { html: rendered.html, headers: { ...rendered.headers, "content-type": "text/html;charset=UTF-8", "cache-control": "no-cache" } };
    }
    return new Response(page.html, { headers: page.headers });
  });

  engine.get(paths.script, async (event: H3Event) => {
    const bundle = await loadScalarBundle();
    const headers: Record<string, string> = {
      "content-type": "text/javascript;charset=UTF-8", "cache-control": IMMUTABLE, etag: bundle.etag, vary: "accept-encoding",
      "x-content-type-options": "nosniff",
    };
    if (matchesETag(event.req.headers.get("if-none-match"), bundle.etag)) return new Response(null, { status: 304, headers });
    const gzip = acceptsGzip(event.req.headers.get("accept-encoding"));
    if (gzip) headers["content-encoding"] = "gzip";
    return new Response(gzip ? bundle.gzipped : bundle.body, { headers });
  });
}

export { buildOpenAPIDocument } from "./openapi.js";
export type * from "./types.js";
