import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { App, type KConfig } from "../src/index.js";
import {
  SHIPPED_BUNDLE, acceptsGzip, loadScalarBundle, matchesETag, readScalarBundle, scalarBundleCandidates,
} from "../src/docs/assets.js";
import { SCALAR_OPTIONS } from "../src/docs/page.js";
import { captureLogs } from "./helpers/logs.js";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const INSTALLED = join(dirname(createRequire(import.meta.url).resolve("@scalar/api-reference")), "browser", "standalone.js");
const build = (config: KConfig = {}) => new App({ logger: captureLogs().logger, ...config });

/** The inline boot script's Scalar configuration, as the browser will see it. */
function pageConfig(html: string): Record<string, unknown> {
  const match = /Object\.assign\((\{.*?\}), \{ url: base \+ "\/openapi\.json" \}\)/.exec(html);
  if (!match) throw new Error("no Scalar configuration in the page");
  return JSON.parse(match[1]!) as Record<string, unknown>;
}

describe("GET {docs.path}: the page", () => {
  let html: string;
  let res: Response;
  beforeAll(async () => {
    res = await build({ docs: { title: "Shop <API> & \"friends\"" } }).request("/docs");
    html = await res.text();
  });

  it("is HTML that is never cached stale", () => {
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html;charset=UTF-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(html).toMatch(/^<!doctype html>/);
  });

  it("is sent with a CSP that allows its own scripts and exactly its boot code, and may not be framed", () => {
    const boot = /<script>([\s\S]*?)<\/script>/.exec(html)?.[1];
    expect(boot).toBeDefined();
    const hash = createHash("sha256").update(boot!).digest("base64");
    expect(res.headers.get("content-security-policy")).toBe(
      `default-src 'self'; script-src 'self' 'sha256-${hash}'; connect-src 'self'; img-src 'self' data:; ` +
        "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
  });

  it("lets Test request reach the absolute servers of docs.servers (templated ones cannot be named)", async () => {
    const app = build({ docs: { servers: ["https://api.example.com/v1 - Production", "http://localhost:8080", "https://{region}.example.com", "/relative"] } });
    const csp = (await app.request("/docs")).headers.get("content-security-policy");
    expect(csp).toContain("; connect-src 'self' https://api.example.com http://localhost:8080; ");
  });

  it("takes its title from DocsConfig, escaped; else the service name", async () => {
    expect(html).toContain("<title>Shop &lt;API&gt; &amp; &quot;friends&quot;</title>");
    const plain = await (await build({ serviceName: "inventory" }).request("/docs")).text();
    expect(plain).toContain("<title>inventory</title>");
  });

  it("names no host at all: no absolute or protocol-relative URL", () => {
    expect(html).not.toMatch(/https?:|wss?:|["'(]\/\/|cdn|jsdelivr|unpkg|fonts\./i);
    expect(html).toContain('<link rel="icon" href="data:,">');
  });

  it("loads the script and the document relative to its own path, with the bundle's content hash", async () => {
    const { version } = await loadScalarBundle();
    expect(html).toContain('var base = location.pathname.replace(/\\/+$/, "");');
    expect(html).toContain(`script.src = base + "/scalar.js?v=${version}";`);
    expect(html).toContain('{ url: base + "/openapi.json" }');
  });

  it("configures Scalar to stay offline", () => {
    expect(pageConfig(html)).toEqual({
      withDefaultFonts: false, telemetry: false, hideClientButton: true, showDeveloperTools: "never",
      agent: { disabled: true }, mcp: { disabled: true }, documentDownloadType: "json",
    });
  });

  it("uses only options this Scalar bundle knows (an upgrade that renames one fails here)", async () => {
    const bundle = await readFile(INSTALLED, "utf8");
    for (const option of Object.keys(SCALAR_OPTIONS)) expect(bundle, option).toMatch(new RegExp(`[{,]${option}:`));
    expect(bundle).toContain("window.Scalar={createApiReference:");
  });
});

describe("GET {docs.path}/scalar.js: the bundle", () => {
  let installed: Buffer;
  let app: App;
  beforeAll(async () => {
    installed = await readFile(INSTALLED);
    app = build();
  });

  it("serves the Scalar standalone bundle gzipped, with a long cache lifetime and an ETag", async () => {
    const res = await app.request("/docs/scalar.js?v=x", { headers: { "accept-encoding": "gzip, deflate, br" } });
    expect(res.status).toBe(200);
    expect(Object.fromEntries(res.headers)).toMatchObject({
      "content-type": "text/javascript;charset=UTF-8",
      "content-encoding": "gzip",
      "cache-control": "public, max-age=31536000, immutable",
      vary: "accept-encoding",
      etag: expect.stringMatching(/^"[\w-]{27}"$/),
    });
    const body = gunzipSync(Buffer.from(await res.arrayBuffer())).toString("utf8");
    // The same code, without the source map comment (the map is not served).
    expect(body).toBe(installed.toString("utf8").replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n"));
    expect(body).not.toContain("sourceMappingURL=standalone.js.map");
  });

  it("serves it uncompressed to clients that do not take gzip", async () => {
    for (const encoding of [undefined, "identity", "gzip;q=0", "br"]) {
      const res = await app.request("/docs/scalar.js", { headers: encoding ? { "accept-encoding": encoding } : {} });
      expect(res.headers.get("content-encoding"), encoding).toBeNull();
      expect((await res.arrayBuffer()).byteLength, encoding).toBeGreaterThan(4_000_000);
    }
  });

  it("answers a matching If-None-Match with 304 and no body", async () => {
    const { etag } = await loadScalarBundle();
    for (const header of [etag, `"other", ${etag}`, `W/${etag}`, "*"]) {
      const res = await app.request("/docs/scalar.js", { headers: { "if-none-match": header } });
      expect([res.status, await res.text(), res.headers.get("etag")], header).toEqual([304, "", etag]);
    }
    expect((await app.request("/docs/scalar.js", { headers: { "if-none-match": '"stale"' } })).status).toBe(200);
  });
});

describe("where the bundle comes from", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "keelson-scalar-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("is, in the build output, dist/src/docs/vendor/scalar-standalone.js next to the compiled module", () => {
    const assets = fileURLToPath(new URL("../src/docs/assets.ts", import.meta.url));
    expect(relative(dirname(assets), fileURLToPath(SHIPPED_BUNDLE))).toBe(join("vendor", "scalar-standalone.js"));
  });

  it("is copied there by the build step (scripts/copy-scalar.mjs), byte for byte", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ["scripts/copy-scalar.mjs", dir], { cwd: ROOT });
    expect(stdout).toContain("scalar-standalone.js");
    const copied = await readFile(join(dir, "src", "docs", "vendor", "scalar-standalone.js"));
    expect(copied.equals(await readFile(INSTALLED))).toBe(true);
    // MIT asks for the notice in every copy: it ships beside the bundle.
    const notice = await readFile(join(dir, "src", "docs", "vendor", "scalar-standalone.LICENSE.txt"), "utf8");
    expect(notice).toMatch(/^scalar-standalone\.js is the browser bundle of @scalar\/api-reference \d+\.\d+\.\d+/);
    expect(notice).toContain("MIT License\n\nCopyright (c) 2023-present Scalar\n");
    expect(notice).toContain("THE SOFTWARE IS PROVIDED \"AS IS\"");
  });

  it("is read from the shipped copy first, the installed package second", async () => {
    const shipped = join(dir, "shipped.js");
    await writeFile(shipped, "window.Scalar = {};\n//# sourceMappingURL=x.map\n");
    const first = await readScalarBundle([pathToFileURL(shipped), pathToFileURL(INSTALLED)]);
    expect([first.source, Buffer.from(first.body).toString()]).toEqual([shipped, "window.Scalar = {};\n"]);
    expect(gunzipSync(first.gzipped).toString()).toBe("window.Scalar = {};\n");
    const fallback = await readScalarBundle([pathToFileURL(join(dir, "missing.js")), pathToFileURL(INSTALLED)]);
    expect(fallback.source).toBe(INSTALLED);
    expect(scalarBundleCandidates().map((u) => fileURLToPath(u))).toEqual([fileURLToPath(SHIPPED_BUNDLE), INSTALLED]);
  });

  it("fails with a message that names every place it looked", async () => {
    const missing = join(dir, "nowhere.js");
    await expect(readScalarBundle([pathToFileURL(missing)])).rejects.toThrow(`run \`make build\``);
    await expect(readScalarBundle([pathToFileURL(missing)])).rejects.toThrow(missing);
  });
});

describe("header helpers", () => {
  it.each([
    [null, false], ["gzip", true], ["deflate, gzip", true], ["GZIP", true], ["*", true], ["gzip;q=0", false],
    ["gzip; q=0.5", true], ["br", false], ["x-gzip", false],
  ])("acceptsGzip(%j) → %s", (header, expected) => {
    expect(acceptsGzip(header)).toBe(expected);
  });

  it.each([
    [null, false], ['"a"', true], ['W/"a"', true], ['"b", "a"', true], ["*", true], ['"b"', false], ["a", false],
  ])("matchesETag(%j, '\"a\"') → %s", (header, expected) => {
    expect(matchesETag(header, '"a"')).toBe(expected);
  });
});
