/**
 * Replaces h3's test/_setup.ts when scripts/h3-suite.sh runs h3's own suite through keelson: the same
 * `describeMatrix` (web: in-process, node: a real socket), with each test's app replaced by a keelson
 * App's (`app.httpEngine` for the routes, `app.fetch` for the requests). H3_SUITE_APP=h3 runs the
 * same harness with h3's own app instead: the baseline a keelson failure is compared with.
 * h3's hooks mocks (`onRequest`, `onError`, `onResponse`) are chained after keelson's own hooks.
 */
import type { Mock } from "vitest";
import { Server as NodeServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { H3, toRequest, type H3Config, type H3Event, type HTTPError } from "h3";
import { toNodeHandler } from "srvx/node";
import { beforeEach, afterEach, vi, it, describe, expect, beforeAll, afterAll } from "vitest";
// Resolved by the suite's vitest config to the keelson checkout under test.
import { App, Logger } from "keelson-under-test";

const useKeelson = process.env.H3_SUITE_APP !== "h3";

export function describeMatrix(
  title: string,
  fn: (ctx: TestContext, testUtils: TestUtils) => void | Promise<void>,
  opts?: TestOptions,
): void {
  const run = (ctx: TestContext) => {
    const utils: TestUtils = {
      expect,
      describe,
      it: Object.assign(interceptFnWithSuffix(it, ctx.target), {
        only: interceptFnWithSuffix(it.only, ctx.target),
        todo: interceptFnWithSuffix(it.todo, ctx.target),
        skip: interceptFnWithSuffix(it.skip, ctx.target),
        skipIf: (condition: boolean) => (condition ? utils.it.skip : utils.it),
        runIf: (condition: boolean) => (condition ? utils.it : utils.it.skip),
      }) as typeof it,
    };
    fn(ctx, utils);
  };
  describe(title, () => {
    describe("web", () => run(setupWebTest(opts)));
    describe("node", () => run(setupNodeTest(opts)));
  });
}

function setupWebTest(opts: TestOptions = {}): TestContext {
  const ctx = setupBaseTest("web", opts);
  beforeEach(() => {
    ctx.fetch = (input, init) => {
      const headers = new Headers(init?.headers);
      if (input.startsWith("/") && !headers.has("host") && !headers.has("x-forwarded-host")) headers.set("Host", "localhost");
      const request = toRequest(input.startsWith("/") ? `http://localhost${input}` : input, { ...init, headers });
      return Promise.resolve(ctx.appFetch(request));
    };
  });
  return ctx;
}

function setupNodeTest(opts: TestOptions = {}): TestContext {
  const ctx = setupBaseTest("node", opts);
  let server: NodeServer;
  let handler: ((req: IncomingMessage, res: ServerResponse) => void) | undefined;
  beforeAll(async () => {
    server = new NodeServer((req, res) => void handler!(req, res));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    ctx.url = `http://localhost:${port}`;
    ctx.fetch = (input, init = {}) => {
      const url = new URL(input, ctx.url);
      const headers = new Headers(init.headers);
      if (!headers.has("host")) headers.set("Host", url.host);
      if (!headers.has("x-forwarded-host")) headers.set("X-Forwarded-Host", url.host);
      if (url.protocol === "https:" && !headers.has("x-forwarded-proto")) headers.set("X-Forwarded-Proto", "https");
      return fetch(`http://127.0.0.1:${port}${url.pathname}${url.search}`, { redirect: "manual", duplex: "half", ...init, headers } as RequestInit);
    };
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
  });
  beforeEach(() => {
    handler = toNodeHandler(ctx.appFetch as Parameters<typeof toNodeHandler>[0]) as typeof handler;
  });
  afterEach(() => {
    handler = undefined;
  });
  return ctx;
}

function setupBaseTest(target: TestContext["target"], opts: TestOptions = {}): TestContext {
  const ctx: TestContext = { target } as TestContext;
  beforeEach(async () => {
    ctx.hooks = { onRequest: vi.fn(), onError: vi.fn(), onResponse: vi.fn() };
    ctx.errors = [];
    ctx.hooks.onError.mockImplementation((error, _event: H3Event) => {
      if (opts.debug) console.error(error);
      ctx.errors.push(error);
    });
    if (!useKeelson) {
      ctx.app = new H3({ debug: true, onError: ctx.hooks.onError, onRequest: ctx.hooks.onRequest, onResponse: ctx.hooks.onResponse });
      ctx.appFetch = ctx.app.fetch;
      return;
    }
    const app = new App({
      env: "production", disableHealth: true, cors: false,
      logger: new Logger({ isProduction: true, output: { write: () => {} } }),
    });
    const engine = app.httpEngine;
    const config = engine.config;
    const keelsonRequest = config.onRequest!;
    const keelsonError = config.onError!;
    config.onRequest = (event) => {
      keelsonRequest(event);
      return ctx.hooks.onRequest(event);
    };
    config.onError = (error, event) => {
      ctx.hooks.onError(error, event);
      return keelsonError(error, event);
    };
    config.onResponse = ctx.hooks.onResponse;
    ctx.app = engine;
    ctx.appFetch = app.fetch;
  });
  afterEach(async () => {
    const errors = ctx.errors;
    vi.resetAllMocks();
    if (!opts.allowUnhandledErrors) {
      const unhandled = errors.filter((error) => error.unhandled);
      if (unhandled.length > 0) throw new Error("[tests] H3 global errors: \n" + unhandled.map((error) => " - " + (error.stack || "")).join("\n"));
    }
  });
  return ctx;
}

export interface TestOptions {
  allowUnhandledErrors?: boolean;
  startServer?: boolean;
  debug?: boolean;
  tracing?: boolean;
}

export interface TestContext {
  errors: HTTPError[];
  hooks: {
    onRequest: Mock<Exclude<H3Config["onRequest"], undefined>>;
    onError: Mock<Exclude<H3Config["onError"], undefined>>;
    onResponse: Mock<Exclude<H3Config["onResponse"], undefined>>;
  };
  target: "web" | "node";
  app: H3;
  /** What serves the requests: keelson's `app.fetch`, or h3's own. */
  appFetch: (request: Request) => Response | Promise<Response>;
  url?: string;
  fetch: (input: string, init?: RequestInit) => Promise<Response>;
}

export interface TestUtils {
  it: typeof it;
  describe: typeof describe;
  expect: typeof expect;
}

function interceptFnWithSuffix<T extends (...args: any[]) => any>(originalFn: T, suffix: string): T {
  return Object.assign((...args: Parameters<T>) => {
    args[0] += ` (${suffix})`;
    return originalFn(...args);
  }, originalFn);
}
