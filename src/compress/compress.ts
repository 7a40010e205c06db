import { Readable, pipeline, type Transform } from "node:stream";
import * as zlib from "node:zlib";
import { HTTPResponse, type H3Event, type Middleware } from "h3";
import { checkNumber, checkOneOf } from "../checks.js";
import { readRequestHeader, readResponseHeader, setResponseHeader } from "../http/headers.js";
import { describeMiddleware } from "../http/middleware-contract.js";
import { encodingNegotiator, type Encoding } from "./negotiate.js";

export type { Encoding as CompressionEncoding } from "./negotiate.js";

/** Options of {@link compress}; every one is optional. */
export interface CompressOptions {
  /** Bodies smaller than this many bytes go out as they are (default 1024): their headers would eat the saving. */
  threshold?: number;
  /**
   * The encodings offered, in the server's order of preference where the client's q-values tie
   * (default `["zstd", "br", "gzip"]`, zstd only where the running Node has it).
   */
  encodings?: readonly Encoding[];
  /** gzip's level, 1 (fastest) to 9 (smallest); default 6, zlib's own. */
  gzipLevel?: number;
  /** brotli's quality, 0 to 11; default 4 (11, brotli's own default, is for files compressed once, not per request). */
  brotliQuality?: number;
  /** zstd's level, 1 to 19; default 3, zstd's own. */
  zstdLevel?: number;
  /**
   * Bodies held in memory (JSON, strings, bytes) up to this many bytes are compressed in one call
   * on the request's own thread, with an exact `Content-Length` (default 65536); larger ones and every
   * stream go through a zlib stream, whose work runs on libuv's thread pool.
   */
  syncThreshold?: number;
}

const ZSTD = typeof zlib.createZstdCompress === "function";
const ALL_ENCODINGS: readonly Encoding[] = ["zstd", "br", "gzip"];

/**
 * Media types worth compressing: text (not event streams, which must reach the client as each event
 * is sent), JSON, XML, JavaScript, form data, SVG and the `+json`/`+xml`/`+text`/`+yaml` suffixes.
 * Images, audio, video and archives are compressed already.
 */
const COMPRESSIBLE = /^\s*(?:text\/(?!event-stream(?:[;\s]|$))[^;\s]+|application\/(?:json|javascript|ecmascript|xml|xml-dtd|x-javascript|x-www-form-urlencoded|graphql-response\+json|wasm|toml|yaml|x-yaml|x-ndjson|ld\+json|manifest\+json)|image\/svg\+xml|[^;\s]+\+(?:json|xml|text|yaml))(?:[;\s]|$)/i;

/** Statuses whose body must not be recoded: no body at all, or a byte range of the unencoded one. */
function bodilessOrPartial(status: number): boolean {
  return status < 200 || status === 204 || status === 205 || status === 206 || status === 304;
}

interface Settings {
  threshold: number;
  syncThreshold: number;
  negotiate: (header: string) => Encoding | undefined;
  gzip: zlib.ZlibOptions;
  brotli: zlib.BrotliOptions;
  zstd: zlib.ZstdOptions;
}

function validateCompressOptions(options: CompressOptions): Settings {
  if (typeof options !== "object" || options === null) throw new Error(`compress() options must be an object, got ${String(options)}`);
  const threshold = checkNumber(options.threshold ?? 1024, "compress threshold", { integer: true, min: 0 });
  const syncThreshold = checkNumber(options.syncThreshold ?? 65_536, "compress syncThreshold", { integer: true, min: 0 });
  const gzipLevel = checkNumber(options.gzipLevel ?? 6, "compress gzipLevel", { integer: true, min: 1, max: 9 });
  const brotliQuality = checkNumber(options.brotliQuality ?? 4, "compress brotliQuality", { integer: true, min: 0, max: 11 });
  const zstdLevel = checkNumber(options.zstdLevel ?? 3, "compress zstdLevel", { integer: true, min: 1, max: 19 });
  let encodings: readonly Encoding[];
  if (options.encodings === undefined) encodings = ZSTD ? ALL_ENCODINGS : ALL_ENCODINGS.filter((name) => name !== "zstd");
  else {
    if (!Array.isArray(options.encodings) || options.encodings.length === 0) {
      throw new Error(`compress encodings must be a non-empty array of "zstd", "br" or "gzip", got ${JSON.stringify(options.encodings)}`);
    }
    encodings = options.encodings.map((name: unknown) => checkOneOf(name, "compress encodings[]", ALL_ENCODINGS));
    if (new Set(encodings).size !== encodings.length) throw new Error(`compress encodings must not repeat a name, got ${JSON.stringify(encodings)}`);
    if (!ZSTD && encodings.includes("zstd")) throw new Error(`compress encodings: "zstd" needs Node 22.15 or later (this is ${process.version})`);
  }
  return {
    threshold,
    syncThreshold,
    negotiate: encodingNegotiator(encodings),
    gzip: { level: gzipLevel },
    brotli: { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: brotliQuality, [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT } },
    zstd: { params: { [zlib.constants.ZSTD_c_compressionLevel]: zstdLevel } },
  };
}

function compressSync(encoding: Encoding, body: Uint8Array, settings: Settings): Buffer {
  if (encoding === "gzip") return zlib.gzipSync(body, settings.gzip);
  if (encoding === "br") {
    return zlib.brotliCompressSync(body, { params: { ...settings.brotli.params, [zlib.constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength } });
  }
  return zlib.zstdCompressSync(body, { ...settings.zstd, pledgedSrcSize: body.byteLength });
}

function compressStream(encoding: Encoding, settings: Settings): Transform {
  if (encoding === "gzip") return zlib.createGzip(settings.gzip);
  if (encoding === "br") return zlib.createBrotliCompress(settings.brotli);
  return zlib.createZstdCompress(settings.zstd);
}

/** `Vary` with `Accept-Encoding` added once to what the response and the request's earlier steps (CORS) put there. */
function varyWith(...values: (string | null | undefined)[]): string {
  // The usual case, no Vary yet on either side: no split, set or join for every response.
  if (values.every((value) => value === null || value === undefined)) return "Accept-Encoding";
  const names: string[] = [];
  const seen = new Set<string>();
  for (const value of [...values, "Accept-Encoding"]) {
    if (value === null || value === undefined) continue;
    for (const raw of value.split(",")) {
      const name = raw.trim();
      const key = name.toLowerCase();
      if (name === "" || seen.has(key)) continue;
      if (key === "*") return "*";
      seen.add(key);
      names.push(name);
    }
  }
  return names.join(", ");
}

/** A strong validator of the unencoded body no longer names the bytes sent: weakened, as nginx does. */
function weakened(etag: string | null): string | null {
  return etag === null || etag.startsWith("W/") ? etag : `W/${etag}`;
}

/**
 * What a handler's value looks like from here: an h3 HTTPResponse (keelson's json()/created(),
 * noContent(), h3's own) or a web Response. Anything else (a raw value of an h3 handler) goes out as is.
 */
function parts(value: unknown): { status: number; statusText: string | undefined; headers: Headers; body: unknown } | undefined {
  if (value instanceof Response) return { status: value.status, statusText: value.statusText, headers: value.headers, body: value.body };
  if (value instanceof HTTPResponse) return { status: value.status ?? 200, statusText: value.statusText, headers: value.headers, body: value.body };
  return undefined;
}

function byteLength(body: unknown): number | undefined {
  if (typeof body === "string") return Buffer.byteLength(body);
  if (body instanceof Uint8Array) return body.byteLength;
  return undefined;
}

function encodeResponse(event: H3Event, value: unknown, accept: string | null, settings: Settings): unknown {
  const response = parts(value);
  if (response === undefined || response.body === null || response.body === undefined || bodilessOrPartial(response.status)) return value;
  const { headers, body } = response;
  const encoded = headers.get("content-encoding");
  if (encoded !== null && encoded.toLowerCase() !== "identity") return value;
  if (!COMPRESSIBLE.test(headers.get("content-type") ?? "")) return value;
  if (headers.get("cache-control")?.includes("no-transform") === true) return value;
  const declared = headers.get("content-length");
  const size = byteLength(body) ?? (declared === null ? undefined : Number(declared));
  if (size !== undefined && size < settings.threshold) return value;
  const inMemory = typeof body === "string" || body instanceof Uint8Array;
  if (!inMemory && !(body instanceof ReadableStream)) return value;
  // From here the body depends on Accept-Encoding, compressed or not: a cache must key on it.
  const vary = varyWith(headers.get("vary"), readResponseHeader(event, "vary"));
  setResponseHeader(event, "vary", vary);
  const encoding = accept === null ? undefined : settings.negotiate(accept);
  if (encoding === undefined) {
    // Without a Vary of its own, the response gets the one just set for the request.
    const own = headers.get("vary");
    if (own === null || own === vary) return value;
    const out = new Headers(headers);
    out.set("vary", vary);
    return new HTTPResponse(body as BodyInit, { status: response.status, statusText: response.statusText, headers: out });
  }
  const out = new Headers(headers);
  out.set("vary", vary);
  out.set("content-encoding", encoding);
  const etag = weakened(headers.get("etag"));
  if (etag !== null) out.set("etag", etag);
  if (inMemory && size! <= settings.syncThreshold) {
    const bytes = compressSync(encoding, typeof body === "string" ? Buffer.from(body) : body, settings);
    out.set("content-length", String(bytes.byteLength));
    return new HTTPResponse(bytes as Uint8Array<ArrayBuffer>, { status: response.status, statusText: response.statusText, headers: out });
  }
  out.delete("content-length");
  const source = inMemory ? Readable.from([typeof body === "string" ? Buffer.from(body) : body], { objectMode: false }) : Readable.fromWeb(body as import("node:stream/web").ReadableStream);
  const compressor = compressStream(encoding, settings);
  // pipeline: the source is read only as fast as the compressor drains, and a client that goes
  // away (srvx destroys the compressor) cancels the handler's stream.
  pipeline(source, compressor, () => {});
  // On Node srvx pipes a node stream into the socket; elsewhere (app.request()) a web stream.
  const stream = event.runtime?.node?.res === undefined ? Readable.toWeb(compressor) : compressor;
  return new HTTPResponse(stream as BodyInit, { status: response.status, statusText: response.statusText, headers: out });
}

/**
 * Response compression: gzip, brotli and (where the running Node has it) zstd, chosen from the
 * request's `Accept-Encoding` with its q-values. Bodies under `threshold` bytes, event streams,
 * WebSocket upgrades, HEAD requests, 204/206/304 responses, bodies already encoded or marked
 * `Cache-Control: no-transform`, and media types that are compressed already go out as they are.
 * Every response it could compress carries `Vary: Accept-Encoding`. Behind a proxy that
 * compresses (nginx, a CDN), leave it out: see docs/compression.md.
 *
 * @example
 * app.use(compress());                                   // every route
 * app.group("/api/reports", compress({ threshold: 4096 })); // one group
 * app.route(get("/export", exportAll).use(compress({ encodings: ["gzip"] })));
 */
export function compress(options: CompressOptions = {}): Middleware {
  const settings = validateCompressOptions(options);
  return describeMiddleware(function compressMiddleware(event, next) {
    // HEAD has no body to encode; an upgrade becomes a WebSocket, never an encoded body.
    if (event.req.method === "HEAD" || readRequestHeader(event, "upgrade") !== null) return next();
    const accept = readRequestHeader(event, "accept-encoding");
    const result = next() as unknown;
    return result instanceof Promise
      ? result.then((value: unknown) => encodeResponse(event, value, accept, settings))
      : encodeResponse(event, result, accept, settings);
  }, {
    headers: {
      vary: { description: "`Accept-Encoding` on every response the route could compress: its body depends on that request header." },
    },
  });
}
