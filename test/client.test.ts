// `keelson client` as a user runs it (a real process, the example's app.ts through tsx), then the
// generated types in use: strict tsc over a file of calls and a file of deliberate mistakes, and
// the same calls run through openapi-fetch against the example service on a real socket.
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import ts from "typescript";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../examples/bookstore/app.js";
import { DEVELOPMENT_SECRET, signBookstoreToken } from "../examples/bookstore/auth.js";
import { buildOpenAPIDocument, type OpenAPIDocument } from "../src/index.js";
import { killAllChildren, spawnChild } from "../harness/child.js";
import { listenOn } from "./helpers/listen.js";

const ROOT = resolve(import.meta.dirname, "..");
const FIXTURES = join(ROOT, "test", "fixtures", "typed-client");

/** Runs `keelson client …` from the sources; resolves with its exit code and output. */
async function keelsonClient(args: string[], imports: string[] = []): Promise<{ code: number | null; output: string }> {
  const preload = imports.flatMap((file) => ["--import", file]);
  const child = spawnChild([process.execPath, "--import", "tsx", ...preload, join(ROOT, "cli", "cli.ts"), "client", ...args], { cwd: ROOT });
  const { code } = await child.exited;
  return { code, output: child.output() };
}

/** Strict tsc (the repository's options) over `files`: every diagnostic as `file:line: message`. */
function typeCheck(files: string[]): string[] {
  const config = ts.readConfigFile(join(ROOT, "tsconfig.json"), (path) => ts.sys.readFile(path));
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const program = ts.createProgram(files, { ...options, noEmit: true });
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const where = diagnostic.file === undefined
      ? ""
      : `${relative(ROOT, diagnostic.file.fileName)}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}: `;
    return `${where}${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`;
  });
}

// Inside the repository, so that the copied fixtures resolve openapi-fetch from its node_modules.
let out: string;
let generated: { code: number | null; output: string };
let notes: { code: number | null; output: string };

beforeAll(async () => {
  out = mkdtempSync(join(ROOT, "test", "fixtures", ".typed-client-"));
  [generated, notes] = await Promise.all([
    keelsonClient(["examples/bookstore/app.ts", "--out", out]),
    keelsonClient([join(FIXTURES, "notes-app.ts"), "--out", join(out, "notes")]),
  ]);
  for (const file of ["calls.ts", "mistakes.ts"]) copyFileSync(join(FIXTURES, file), join(out, file));
  if (existsSync(join(out, "notes", "api.d.ts"))) {
    copyFileSync(join(out, "notes", "api.d.ts"), join(out, "notes-api.d.ts"));
    copyFileSync(join(FIXTURES, "notes-calls.ts"), join(out, "notes-calls.ts"));
  }
});

afterEach(() => killAllChildren());

afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

describe("keelson client", () => {
  it("is quiet: its one line, not the App's shutdown lines nor its hooks' own, whatever LOG_LEVEL says", async () => {
    expect(generated.code, generated.output).toBe(0);
    expect(generated.output.trimEnd().split("\n")).toEqual([expect.stringMatching(/^keelson client: \d+ operation\(s\) → /)]);
    const child = spawnChild([process.execPath, "--import", "tsx", join(ROOT, "cli", "cli.ts"), "client", "examples/bookstore/main.ts", "--out", join(out, "quiet")], {
      cwd: ROOT, env: { LOG_LEVEL: "debug" },
    });
    expect((await child.exited).code, child.output()).toBe(0);
    expect(child.output().trimEnd().split("\n")).toEqual([expect.stringMatching(/^keelson client: \d+ operation\(s\) → /)]);
  });

  it("writes the App's OpenAPI document and its types", () => {
    expect(generated.code, generated.output).toBe(0);
    expect(generated.output).toContain("9 operation(s)");
    const written = JSON.parse(readFileSync(join(out, "openapi.json"), "utf8")) as OpenAPIDocument;
    const app = buildApp();
    expect(written).toEqual(JSON.parse(JSON.stringify(buildOpenAPIDocument(app.routes, app.config.docs))));
    const types = readFileSync(join(out, "api.d.ts"), "utf8");
    expect(types).toContain("export interface paths");
    expect(types).toContain('"/api/books/{id}"');
  });

  it("documents every error response with the KError JSON shape", () => {
    const document = JSON.parse(readFileSync(join(out, "openapi.json"), "utf8")) as OpenAPIDocument;
    const schema = (response: unknown): unknown => {
      const ref = (response as { $ref?: string }).$ref;
      const resolved = ref === undefined ? response : document.components.responses?.[ref.split("/").pop()!];
      return (resolved as { content?: Record<string, { schema?: unknown }> }).content?.["application/json"]?.schema;
    };
    for (const [path, item] of Object.entries(document.paths)) {
      if (path === "/health") continue;
      for (const [method, operation] of Object.entries(item as Record<string, { responses: Record<string, unknown> }>)) {
        const errors = Object.entries(operation.responses).filter(([status]) => Number(status) >= 400);
        expect(errors.map(([status]) => status), `${method} ${path}`).toContain("500");
        for (const [status, response] of errors) {
          expect(schema(response), `${method} ${path} ${status}`).toEqual({ $ref: "#/components/schemas/ErrorResponse" });
        }
      }
    }
  });

  it("types every call: strict tsc accepts the calls and flags each deliberate mistake", () => {
    expect(existsSync(join(out, "api.d.ts"))).toBe(true);
    expect(typeCheck([join(out, "calls.ts"), join(out, "mistakes.ts")])).toEqual([]);
  });

  it("types defaulted fields as the document does (optional in a body, present in a response) and page/limit as query parameters", async () => {
    expect(notes.code, notes.output).toBe(0);
    expect(typeCheck([join(out, "notes-calls.ts")])).toEqual([]);
    const { buildApp: buildNotes } = (await import(join(FIXTURES, "notes-app.ts"))) as { buildApp(): import("../src/index.js").App };
    const app = buildNotes();
    const { calls } = (await import(join(out, "notes-calls.ts"))) as { calls(baseUrl: string): Promise<Record<string, unknown[]>> };
    const server = await listenOn(app);
    try {
      expect(await calls(server.url)).toEqual({
        made: [201, false, []],
        full: [201, true],
        second: [2, 20, 0],
        sized: [1, 2, "defaults left out"],
        bare: [1, 20],
      });
    } finally {
      await server.stop();
    }
  });

  it("documents an entry that calls listen() at import without serving it", async () => {
    const result = await keelsonClient([join(FIXTURES, "..", "client-listen-entry.ts"), "--out", join(out, "listen")]);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain("entry: building done, calling listen()");
    expect(result.output).not.toContain("listening on");
    expect(result.output).not.toContain("entry: listen() settled");
    // The same App as the example's app.ts builds: the same operations, the same types.
    expect(result.output).toContain(/\d+ operation\(s\)/.exec(generated.output)![0]);
    expect(readFileSync(join(out, "listen", "api.d.ts"), "utf8")).toBe(readFileSync(join(out, "api.d.ts"), "utf8"));
  });

  it("fails fast, before building the App, when openapi-typescript is not installed", async () => {
    const result = await keelsonClient([join(FIXTURES, "..", "client-listen-entry.ts"), "--out", join(out, "none")], [join(FIXTURES, "..", "hide-openapi-typescript.mjs")]);
    expect(result.code, result.output).toBe(1);
    expect(result.output).toContain("keelson client: openapi-typescript is not installed: npm install --save-dev openapi-typescript");
    expect(result.output).not.toContain("entry: building done");
    expect(existsSync(join(out, "none"))).toBe(false);
  });

  it("calls every example route through openapi-fetch against the running service", async () => {
    const server = await listenOn(buildApp({ port: 0 }));
    try {
      const { callEveryRoute } = (await import(join(out, "calls.ts"))) as { callEveryRoute(baseUrl: string, token: string): Promise<Record<string, unknown[]>> };
      expect(await callEveryRoute(server.url, await signBookstoreToken(DEVELOPMENT_SECRET))).toEqual({
        health: [200, "UP"],
        hello: [200, "Bonjour, Ada !", "fr"],
        list: [200, 2, 2, 3],
        created: [201, true, "Dune"],
        retried: [201, "true", true],
        reused: [422, "IDEMPOTENCY_KEY_REUSED"],
        one: [200, "Dune"],
        replaced: [200, "Dune Messiah", undefined],
        deleted: [204],
        gone: [404, "NOT_FOUND", undefined],
        invalid: [422, "VALIDATION_ERROR", ["body.title"]],
      });
    } finally {
      await server.stop();
    }
  });

  it("reads a running service's document with --from-url, and says what is wrong on bad input", async () => {
    const server = await listenOn(buildApp({ port: 0 }));
    try {
      const fromUrl = join(out, "from-url");
      const result = await keelsonClient(["--from-url", `${server.url}/docs/openapi.json`, "--out", fromUrl]);
      expect(result.code, result.output).toBe(0);
      expect(readFileSync(join(fromUrl, "api.d.ts"), "utf8")).toBe(readFileSync(join(out, "api.d.ts"), "utf8"));
    } finally {
      await server.stop();
    }
    const missing = await keelsonClient([]);
    expect([missing.code, missing.output]).toEqual([2, expect.stringContaining("missing <entry>")]);
    const notApp = await keelsonClient(["examples/bookstore/books.ts", "--out", join(out, "x")]);
    expect([notApp.code, notApp.output]).toEqual([1, expect.stringContaining("exports neither \"buildApp\" nor a default export")]);
  });
});
