import { Logger, type LogFormat } from "../../src/logging/logger.js";

/** A logger writing into memory, and what it wrote, line by line. */
export interface LogCapture {
  readonly logger: Logger;
  /** Every complete line written so far (buffered lines are flushed first). */
  lines(): string[];
  /** The lines parsed as JSON (for a JSON-format capture). */
  entries(): Record<string, unknown>[];
  /** Forgets what was captured so far. */
  clear(): void;
}

/** A capture in text format (development) unless told otherwise. */
export function captureLogs(format: LogFormat = "text", isProduction = format === "json"): LogCapture {
  const chunks: string[] = [];
  const logger = new Logger({ isProduction, format, output: { write: (chunk: string) => chunks.push(chunk) } });
  const lines = (): string[] => {
    logger.flush();
    return chunks.join("").split("\n").filter((line) => line.length > 0);
  };
  return {
    logger,
    lines,
    entries: () => lines().map((line) => JSON.parse(line) as Record<string, unknown>),
    clear() {
      logger.flush();
      chunks.length = 0;
    },
  };
}

/** `[LEVEL] YYYY-MM-DD HH:MM:SS ` — the start of every text line. */
export const TEXT_PREFIX = String.raw`\[(?:DEBUG|INFO|WARN|ERROR)\] \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} `;

/**
 * The regex of one text request line, e.g. `[WARN] 2026-11-22 05:30:33 GET /nope 404 0.42ms request_id=3f9c0a7b1e-7`
 * (a `trace_id=` may follow).
 */
export function requestLine(level: string, method: string, path: string, status: number): RegExp {
  const escaped = `${method} ${path} ${status}`.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(String.raw`^\[${level}\] \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} ${escaped} \d+\.\d{1,2}(?:ms|s) request_id=[\w.:-]+(?: trace_id=\w+)?$`);
}
