import { createHash } from "node:crypto";
import { SCALAR_SCRIPT } from "./openapi.js";

/**
 * Scalar options that keep the page offline: no font CDN, no telemetry, and no features whose
 * only purpose is to reach Scalar's hosted services (AI agent, MCP, developer toolbar, the
 * "open in client.scalar.com" button). With no `proxyUrl`, "Test request" goes straight to the API.
 */
export const SCALAR_OPTIONS = {
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: "never",
  agent: { disabled: true },
  mcp: { disabled: true },
  documentDownloadType: "json",
} as const;

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHTML(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/** JSON that is safe inside a `<script>` element (no `</script>`, no `<!--`). */
function scriptJSON(value: unknown): string {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/** The docs page and the headers it is sent with. */
export interface DocsPage {
  html: string;
  headers: Readonly<Record<string, string>>;
}

/**
 * The page's Content-Security-Policy: its own origin, plus the boot script by hash (no
 * 'unsafe-inline' for scripts, so injected markup cannot run script). `connect` lists the API's
 * other origins (from `docs.servers`) that "Test request" may call.
 */
function contentSecurityPolicy(boot: string, connect: readonly string[]): string {
  const bootHash = createHash("sha256").update(boot).digest("base64");
  return [
    "default-src 'self'",
    `script-src 'self' 'sha256-${bootHash}'`,
    `connect-src ${["'self'", ...connect].join(" ")}`,
    // The page's own icon is `data:,`, so that browsers ask for no /favicon.ico (the only data: image).
    "img-src 'self' data:",
    // Scalar (Vue) creates <style> elements and style attributes at run time, with contents no
    // hash or nonce can name in advance. Styles cannot run script; scripts stay hash-only.
    "style-src 'self' 'unsafe-inline'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The origin of an absolute http(s) server URL without template variables, else undefined. */
export function serverOrigin(url: string): string | undefined {
  if (url.includes("{")) return undefined;
  try {
    const { protocol, origin } = new URL(url);
    return protocol === "http:" || protocol === "https:" ? origin : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The docs page. It names no host at all: the document and the script are resolved against the
 * page's own path when it loads, so it works at any docs path, with or without a trailing slash,
 * and behind a proxy that mounts the service under a prefix. Its headers keep it from being
 * framed, sniffed or leaking its URL in a Referer, and allow only its own scripts.
 */
export function renderDocsPage(title: string, scriptVersion: string, documentPath: string, connect: readonly string[] = []): DocsPage {
  // zod inside the Scalar bundle probes for eval with Function(""), which the CSP refuses (and
  // reports as a violation); its documented jitless switch skips the probe.
  const boot = `(function () {
  window.__zod_globalConfig = { jitless: true };
  var base = location.pathname.replace(/\\/+$/, "");
  var config = Object.assign(${scriptJSON(SCALAR_OPTIONS)}, { url: base + "/openapi.json" });
  var script = document.createElement("script");
  script.src = base + ${scriptJSON(`/${SCALAR_SCRIPT}?v=${scriptVersion}`)};
  script.onload = function () { window.Scalar.createApiReference("#app", config); };
  script.onerror = function () { document.getElementById("app").textContent = "Could not load the API reference script."; };
  document.head.appendChild(script);
})();`;
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHTML(title)}</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="app"></div>
<noscript>This page needs JavaScript. The OpenAPI document is at ${escapeHTML(documentPath)}.</noscript>
<script>${boot}</script>
</body>
</html>
`;
  const headers = {
    "content-security-policy": contentSecurityPolicy(boot, connect),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
  };
  return { html, headers };
}
