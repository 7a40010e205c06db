/**
 * A Logger for tests: its lines stay in memory, where a test reads them, instead of going to
 * stdout between the test runner's own lines.
 */
import { LogFormatText, Logger, type LogFormat, type LogLevel } from "./logger.js";

/** Settings for createTestLogger(). */
export interface TestLoggerOptions {
  /** Lines below it are not kept. Default `debug`: everything, whatever `LOG_LEVEL` says. */
  level?: LogLevel;
  /** Default `text`, the development format. */
  format?: LogFormat;
}

/** A Logger that keeps its lines: see createTestLogger(). */
export interface TestLogger extends Logger {
  /** The lines logged so far, without their newlines (what the logger still buffered included). */
  lines(): string[];
  /** The lines as they would have been written, newlines included: to print when a test fails. */
  output(): string;
  /** Forgets the lines kept so far. */
  clear(): void;
}

class CapturingLogger extends Logger implements TestLogger {
  readonly #chunks: string[];

  constructor(options: TestLoggerOptions) {
    const chunks: string[] = [];
    super({ isProduction: false, format: options.format ?? LogFormatText, level: options.level ?? "debug", output: { write: (chunk: string) => void chunks.push(chunk) } });
    this.#chunks = chunks;
  }

  lines(): string[] {
    return this.output().split("\n").filter((line) => line !== "");
  }

  output(): string {
    // Lines wait for the end of the event-loop turn: a test reads them right after the call.
    this.flush();
    return this.#chunks.join("");
  }

  clear(): void {
    this.flush();
    this.#chunks.length = 0;
  }
}

/**
 * A quiet Logger for tests: give it to the App (`new App({ logger })`) and its lines, the request
 * lines included, are kept in memory instead of written to stdout. `lines()` reads them (to assert
 * on what was logged), `output()` gives them back as text (to print when a test failed), `clear()`
 * starts over. Development format (text) and every level by default. Its `error()` still exits the
 * process, as every Logger's does.
 *
 * @example
 * const logger = createTestLogger();
 * const app = new App({ logger });
 * await app.request("/health");
 * expect(logger.lines()).toContainEqual(expect.stringContaining("GET /health 200"));
 * afterEach((context) => {
 *   if (context.task.result?.state === "fail") process.stdout.write(logger.output());
 *   logger.clear();
 * });
 */
export function createTestLogger(options: TestLoggerOptions = {}): TestLogger {
  return new CapturingLogger(options);
}
