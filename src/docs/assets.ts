import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { gzip } from "node:zlib";

/** The Scalar API Reference browser bundle, read once and kept in memory with its gzip form. */
export interface ScalarBundle {
  readonly body: Uint8Array<ArrayBuffer>;
  readonly gzipped: Uint8Array<ArrayBuffer>;
  /** Strong ETag (quoted) of the uncompressed bundle. */
  readonly etag: string;
  /** Short content hash, used as the cache-busting `?v=` of the page's script URL. */
  readonly version: string;
  /** Where it was read from. */
  readonly source: string;
}

/** Where `make build` copies the bundle: next to this module in `dist/src/docs/`. */
export const SHIPPED_BUNDLE = new URL("./vendor/scalar-standalone.js", import.meta.url);

const gzipAsync = promisify(gzip);

/**
 * The shipped copy first; when running from source (tsx, vitest) the devDependency itself.
 * `@scalar/api-reference` exports no subpath for the bundle, so it is found from its main entry.
 */
export function scalarBundleCandidates(): URL[] {
  const list = [SHIPPED_BUNDLE];
  try {
    const main = createRequire(import.meta.url).resolve("@scalar/api-reference");
    list.push(new URL("./browser/standalone.js", pathToFileURL(main)));
  } catch {
    // Not installed: only the shipped copy can work.
  }
  return list;
}

/** Reads the first of `candidates` that exists. Rejects, naming every place tried, when none does. */
export async function readScalarBundle(candidates: readonly URL[]): Promise<ScalarBundle> {
  const tried: string[] = [];
  for (const url of candidates) {
    let text: string;
    try {
      text = await readFile(url, "utf8");
    } catch {
      tried.push(url.pathname);
      continue;
    }
    // The source map is not served: a browser with DevTools open would only get a 404 for it.
    // Read once; every response shares these bytes (see sharedBody).
    const body = new Uint8Array(Buffer.from(text.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n")));
    const hash = createHash("sha256").update(body).digest("base64url");
    return { body, gzipped: new Uint8Array(await gzipAsync(body)), etag: `"${hash.slice(0, 27)}"`, version: hash.slice(0, 12), source: url.pathname };
  }
  throw new Error(`Scalar API Reference bundle not found (run \`make build\`, or install @scalar/api-reference); looked in ${tried.join(", ")}`);
}

let loading: Promise<ScalarBundle> | undefined;

/** Reads the bundle on first use only; a failed read is retried by the next call. */
export function loadScalarBundle(): Promise<ScalarBundle> {
  loading ??= readScalarBundle(scalarBundleCandidates()).catch((error: unknown) => {
    loading = undefined;
    throw error;
  });
  return loading;
}

/** True when an `If-None-Match` header names `etag` (or is `*`). */
export function matchesETag(header: string | null, etag: string): boolean {
  if (header === null) return false;
  return header.split(",").some((tag) => {
    const t = tag.trim();
    return t === "*" || t === etag || t === `W/${etag}`;
  });
}

/** Whether the client takes gzip (`Accept-Encoding: gzip`, not `gzip;q=0`). */
export function acceptsGzip(header: string | null): boolean {
  if (header === null) return false;
  return header.split(",").some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(";");
    if (coding !== "gzip" && coding !== "*") return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}
