import { mkdirSync, writeFileSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { buildOpenAPIDocument, type OpenAPIDocsConfig } from "../src/docs/openapi.js";
import type { OpenAPIDocument } from "../src/docs/types.js";
import type { RegisteredRoute } from "../src/http/route.js";
import { typeScriptEntryHint } from "../supervisor/entry-hint.js";
import { errorMessage } from "../src/errors.js";

export const CLIENT_USAGE = `Usage: keelson client <entry> [--export NAME] [--out DIR]
       keelson client --from-url URL [--out DIR]

Writes DIR/openapi.json (the App's OpenAPI document) and DIR/api.d.ts (TypeScript types of every
path, parameter, body and response, one type per status code) for openapi-fetch's createClient.

<entry> is a module that builds the App: its export NAME (default "buildApp"), else its default
export, is an App or a function (no arguments, may be async) returning one. An entry that calls
listen() while imported (a main.ts) is documented without serving: listen() hands the App over.
--from-url reads the document of a running service instead (e.g. http://localhost:3000/docs/openapi.json).

Options:
      --out DIR      where to write (default: ./client)
      --export NAME  the entry's export that builds the App (default: buildApp)
  -h, --help         this text

Needs openapi-typescript (npm install --save-dev openapi-typescript). A TypeScript entry:
NODE_OPTIONS="--import tsx" npx keelson client src/app.ts`;

/** What `keelson client …` asks for. */
export type ClientRequest =
  | { command: "help" }
  | { command: "error"; message: string }
  | { command: "client"; source: { entry: string; exportName: string } | { url: string }; out: string };

/** Parses the arguments after `client`. Never throws. */
export function parseClientArgs(argv: readonly string[]): ClientRequest {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv], allowPositionals: true, strict: true,
      options: { out: { type: "string" }, export: { type: "string" }, "from-url": { type: "string" }, help: { type: "boolean", short: "h" } },
    });
    if (values.help === true) return { command: "help" };
    const out = resolve(values.out ?? "client");
    const url = values["from-url"];
    if (url !== undefined) {
      if (positionals.length > 0) return { command: "error", message: "give either <entry> or --from-url, not both" };
      if (!URL.canParse(url)) return { command: "error", message: `--from-url expects a URL, got "${url}"` };
      return { command: "client", source: { url }, out };
    }
    const [entry, ...extra] = positionals;
    if (entry === undefined) return { command: "error", message: "missing <entry> (the module that builds the App) or --from-url" };
    if (extra.length > 0) return { command: "error", message: `unexpected argument(s): ${extra.join(" ")}` };
    return { command: "client", source: { entry, exportName: values.export ?? "buildApp" }, out };
  } catch (error) {
    return { command: "error", message: errorMessage(error) };
  }
}

/** The part of an App the command reads; duck-typed because the entry may load its own copy of keelson. */
interface AppLike {
  readonly routes: readonly RegisteredRoute[];
  readonly config: { readonly docs: OpenAPIDocsConfig };
  close?: () => Promise<unknown>;
}

const isAppLike = (value: unknown): value is AppLike =>
  typeof value === "object" && value !== null && Array.isArray((value as AppLike).routes) && typeof (value as AppLike).config?.docs === "object";

/** What App.listen() looks for (src/app.ts): set, it hands the App over instead of serving. */
const DOCUMENT_ONLY = Symbol.for("keelson.client.documentOnly");

/**
 * Imports `entry` and builds its App: the named export, else the default export, called if it is
 * a function. An entry that calls `listen()` while it is imported (a main.ts) never serves:
 * listen() hands its App over and never settles, so the import is not awaited past that point.
 */
async function loadApp(entry: string, exportName: string): Promise<AppLike> {
  const url = entry.startsWith("file:") ? entry : pathToFileURL(isAbsolute(entry) ? entry : resolve(entry)).href;
  const listening = new Promise<AppLike>((handOver) => {
    (globalThis as Record<symbol, unknown>)[DOCUMENT_ONLY] = handOver;
  });
  const imported = (import(url) as Promise<Record<string, unknown>>).then((module) => ({ module }));
  const first = await Promise.race([imported, listening.then((app) => ({ app }))]);
  if ("app" in first) return first.app;
  const { module } = first;
  const exported = module[exportName] ?? module.default;
  if (exported === undefined) throw new Error(`${entry} exports neither "${exportName}" nor a default export (nor calls listen())`);
  const app: unknown = typeof exported === "function" ? await (exported as () => unknown)() : exported;
  if (!isAppLike(app)) throw new Error(`${entry}: "${module[exportName] === undefined ? "default" : exportName}" is not an App nor a function returning one`);
  return app;
}

async function readDocument(source: { entry: string; exportName: string } | { url: string }): Promise<OpenAPIDocument> {
  if ("url" in source) {
    const response = await fetch(source.url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(30_000) });
    if (!response.ok) throw new Error(`GET ${source.url} answered ${response.status}`);
    return (await response.json()) as OpenAPIDocument;
  }
  // A tool, not the service: the App's lines (its start, its shutdown, its hooks' own) are not this
  // command's output. Warnings and errors still show: they say why a build failed. Before the entry
  // is imported: loggers read LOG_LEVEL when they are made.
  process.env.LOG_LEVEL = "warn";
  const app = await loadApp(source.entry, source.exportName).catch((error: unknown) => {
    const hint = typeScriptEntryHint("client", source.entry, String((error as Error)?.stack ?? error), process.execArgv);
    throw hint === undefined ? error : new Error(`${errorMessage(error)}\nHint: ${hint}`, { cause: error });
  });
  try {
    return buildOpenAPIDocument(app.routes, app.config.docs);
  } finally {
    // Runs the App's shutdown hooks: whatever building it opened (a database pool) is closed.
    await app.close?.();
  }
}

type Generator = typeof import("openapi-typescript");

/** openapi-typescript is an optional peer: only those who generate clients install it. Loaded first, before any App is built. */
async function loadGenerator(): Promise<Generator> {
  try {
    return await import("openapi-typescript");
  } catch {
    throw new Error("openapi-typescript is not installed: npm install --save-dev openapi-typescript");
  }
}

/**
 * The types of the document. `defaultNonNullable: false`: a field with a default is optional
 * where the document says so (request bodies and parameters: keelson writes the input side of a
 * schema there) and present where the document requires it (responses: the output side lists it
 * in `required`), instead of required everywhere.
 */
async function toTypeScript(generator: Generator, document: OpenAPIDocument): Promise<string> {
  const ast = await generator.default(document as unknown as Parameters<Generator["default"]>[0], { defaultNonNullable: false });
  return generator.COMMENT_HEADER + generator.astToString(ast);
}

/**
 * `keelson client`: writes `openapi.json` and `api.d.ts` into `--out`; resolves to the exit code
 * (0 written, 1 failed, 2 usage error).
 *
 * @example
 * // NODE_OPTIONS="--import tsx" npx keelson client src/app.ts --out src/client
 * process.exitCode = await runClientCommand(["src/app.ts", "--out", "src/client"]);
 */
export async function runClientCommand(argv: readonly string[]): Promise<number> {
  const request = parseClientArgs(argv);
  if (request.command === "help") {
    process.stdout.write(CLIENT_USAGE + "\n");
    return 0;
  }
  if (request.command === "error") {
    process.stderr.write(`keelson client: ${request.message}\nRun "keelson client --help" for usage.\n`);
    return 2;
  }
  try {
    const generator = await loadGenerator();
    const document = await readDocument(request.source);
    const types = await toTypeScript(generator, document);
    mkdirSync(request.out, { recursive: true });
    writeFileSync(join(request.out, "openapi.json"), JSON.stringify(document, null, 2) + "\n");
    writeFileSync(join(request.out, "api.d.ts"), types);
    const operations = Object.values(document.paths).reduce((n, item) => n + Object.keys(item).length, 0);
    process.stdout.write(`keelson client: ${operations} operation(s) → ${join(request.out, "openapi.json")}, ${join(request.out, "api.d.ts")}\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`keelson client: ${errorMessage(error)}\n`);
    return 1;
  }
}
