import type { Middleware } from "h3";
import { z } from "zod";
import { App, envNumber, get, type KConfig, type Scheduler, type Translator } from "../../src/index.js";
import { createDatabaseModule, openSQLite, type SQLDatabase } from "../../src/entries/sql.js";
import { bookstoreSecret, requireWriter } from "./auth.js";
import { booksModule } from "./books.js";
import { setupTelemetry } from "./telemetry.js";

const MESSAGES: Record<string, Record<string, string>> = {
  en: { greeting: "Hello, %s!" },
  fr: { greeting: "Bonjour, %s !" },
  de: { greeting: "Hallo, %s!" },
};

/** A tiny translator over a message table; `%s` is replaced by the first argument. */
export const translator: Translator = {
  languages: Object.keys(MESSAGES),
  translate: (lang, key, ...args) => (MESSAGES[lang]?.[key] ?? key).replace("%s", String(args[0] ?? "")),
};

/** Counts requests in the background: a stand-in for cache refreshes, outbox flushes and the like. */
export class HeartbeatScheduler implements Scheduler {
  ticks = 0;
  #timer: NodeJS.Timeout | undefined;
  start(): void {
    this.#timer = setInterval(() => this.ticks++, 1000);
    this.#timer.unref();
  }
  stop(): void {
    clearInterval(this.#timer);
  }
}

const HelloQuery = z.object({ name: z.string().max(100).optional().describe("Who to greet (default: world)") });
const Greeting = z.object({
  message: z.string().describe("The greeting, in the negotiated language"),
  lang: z.enum(["en", "fr", "de"]).describe("Language picked from Accept-Language"),
}).meta({ id: "Greeting" });

/** Stamps the API version on responses of the /api group. */
const apiVersion: Middleware = function apiVersion(event) {
  event.res.headers.set("x-api-version", "1");
};

/**
 * Builds the example bookstore: a module inside a group, a translator, a scheduler, a database
 * with its health checker. `database` defaults to a private in-memory SQLite database (tests);
 * main.ts passes the shared one (`openBookstoreDatabase()`).
 */
export function buildApp(config: KConfig = {}, database: SQLDatabase = openSQLite({ file: ":memory:" })): App {
  const app = new App({
    serviceName: "bookstore",
    version: process.env.npm_package_version ?? "1.0.0",
    docs: {
      title: "Bookstore API",
      description: "The keelson example service: a small catalogue of books.",
      version: "1.0.0",
      contact: { name: "Keelson", url: "https://example.com/keelson", email: "keelson@example.com" },
      license: { name: "MIT", url: "https://opensource.org/licenses/MIT" },
      tags: [
        { name: "books", description: "The catalogue" },
        { name: "misc", description: "Everything else" },
      ],
    },
    // envNumber refuses "abc" or "-1" with the variable's name; the App then checks the values
    // themselves (a delay as long as the budget is refused too).
    shutdownDelay: envNumber("KEELSON_SHUTDOWN_DELAY_MS", { integer: true, min: 0 }) ?? 0,
    shutdownTimeout: envNumber("KEELSON_SHUTDOWN_TIMEOUT_MS", { integer: true, above: 0 }) ?? 10_000,
    // A worker whose event loop runs half a second late is saturated: 503 + Retry-After beats a timeout.
    loadShedding: { maxEventLoopDelay: 500 },
    ...config,
  });
  app.setTranslator(translator);
  setupTelemetry(app);
  app.registerScheduler(new HeartbeatScheduler());
  // /health runs SELECT 1; the connection closes in a shutdown hook.
  app.use(createDatabaseModule(database));
  // The write routes need a bearer token with books:write (`make token` prints one).
  const { secret, warning } = bookstoreSecret();
  if (warning) app.logger.warn(warning);
  app.group("/api", apiVersion).use(booksModule(database, requireWriter(secret)));
  app.route(
    get("/hello", { query: HelloQuery, responses: { 200: Greeting } }, (ctx) => ({
      message: ctx.t("greeting", ctx.query.name ?? "world"),
      lang: ctx.lang,
    }))
      .tag("misc")
      .describe("A translated greeting", "Language from Accept-Language: en, fr or de."),
  );
  app.onShutdown(function announceShutdown() {
    app.logger.info("bookstore: goodbye");
  });
  return app;
}
