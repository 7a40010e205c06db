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

/**
 * The docs page. It names no host at all: the document and the script are resolved against the
 * page's own path when it loads, so it works at any docs path, with or without a trailing slash,
 * and behind a proxy that mounts the service under a prefix.
 */
export function renderDocsPage(title: string, scriptVersion: string, documentPath: string): string {
  const boot = `(function () {
  var base = location.pathname.replace(/\\/+$/, "");
  var config = Object.assign(${scriptJSON(SCALAR_OPTIONS)}, { url: base + "/openapi.json" });
  var script = document.createElement("script");
  script.src = base + ${scriptJSON(`/${SCALAR_SCRIPT}?v=${scriptVersion}`)};
  script.onload = function () { window.Scalar.createApiReference("#app", config); };
  script.onerror = function () { document.getElementById("app").textContent = "Could not load the API reference script."; };
  document.head.appendChild(script);
})();`;
  return `<!doctype html>
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
}
