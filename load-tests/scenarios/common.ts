// What every scenario gets and returns: the shared context, the verdict line, small formatting.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { builtServers, type Build } from "../lib/build.js";
import type { LoadClient } from "../lib/load-client.js";
import type { Pinning } from "../lib/machine.js";
import type { LoadResult } from "../lib/types.js";

export interface Verdict {
  name: string;
  pass: boolean;
  /** The whole `VERDICT <name>: PASS|FAIL — …` line. */
  line: string;
}

export interface Context {
  /** The repository root. */
  root: string;
  pinning: Pinning;
  /** autocannon in its own process (pinned to the CPU the servers are not on, when possible). */
  client: LoadClient;
  /** Length of each load phase (`--seconds`). */
  seconds: number;
  /** The benchmark servers as built in dist/ (bundles made on first use, removed at exit). */
  build(): Build;
  /** A temp dir for server logs, removed at exit. */
  logDir: string;
}

export type Scenario = (context: Context) => Promise<Verdict>;

export function verdict(name: string, pass: boolean, sentence: string): Verdict {
  const line = `VERDICT ${name}: ${pass ? "PASS" : "FAIL"} — ${sentence}`;
  console.log(line);
  return { name, pass, line };
}

export function createContext(root: string, pinning: Pinning, seconds: number): Omit<Context, "client"> {
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), "keelson-scenarios-logs-"));
  let build: Build | null = null;
  process.on("exit", () => {
    build?.remove();
    fs.rmSync(logDir, { recursive: true, force: true });
  });
  return {
    root,
    pinning,
    seconds,
    logDir,
    build: () => (build ??= builtServers(root)),
  };
}

/** Prints a Markdown table. */
export function table(headers: string[], rows: Array<Array<string | number>>): void {
  console.log(`| ${headers.join(" | ")} |`);
  console.log(`| ${headers.map(() => "---").join(" | ")} |`);
  for (const row of rows) console.log(`| ${row.join(" | ")} |`);
}

/** `ECONNRESET 3, timeout 1`, or `none`. */
export function formatCodes(codes: Record<string, number>): string {
  const entries = Object.entries(codes).filter(([, n]) => n > 0);
  return entries.length === 0 ? "none" : entries.map(([code, n]) => `${code} ${n}`).join(", ");
}

/**
 * Requests autocannon wrote that got no answer and no error: lost on a connection the server
 * closed (autocannon reconnects on a FIN without counting anything). Every request is answered,
 * lost, or still in flight when the run stops (`pipelining` per connection); every error loses
 * the `pipelining` requests of its connection attempt (a refused connect included: those were
 * queued on a socket that never connected, so none reached the server).
 */
export function silentlyLost(result: LoadResult, connections: number, pipelining: number): number {
  return result.sent - result.requests - pipelining * (connections + result.errors);
}
