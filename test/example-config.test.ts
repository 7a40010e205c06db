// The example reads its environment through keelson's checks (issue 23, defect 5): a bad value
// stops it at startup with one line naming the variable (or the option), exit 1, instead of
// running with NaN as its shutdown budget. Real processes, the example's own main.ts.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, expect, it } from "vitest";
import { killAllChildren, spawnChild } from "./helpers/child.js";

const ROOT = resolve(import.meta.dirname, "..");
const dir = mkdtempSync(join(tmpdir(), "keelson-example-config-"));
afterAll(() => {
  killAllChildren();
  rmSync(dir, { recursive: true, force: true });
});

it.each([
  [{ KEELSON_SHUTDOWN_TIMEOUT_MS: "abc" }, 'KEELSON_SHUTDOWN_TIMEOUT_MS must be an integer above 0, got "abc"'],
  [{ KEELSON_SHUTDOWN_TIMEOUT_MS: "NaN" }, 'KEELSON_SHUTDOWN_TIMEOUT_MS must be an integer above 0, got "NaN"'],
  [{ KEELSON_SHUTDOWN_DELAY_MS: "-5" }, 'KEELSON_SHUTDOWN_DELAY_MS must be an integer >= 0, got "-5"'],
  [{ KEELSON_SHUTDOWN_DELAY_MS: "15000" }, "shutdownDelay (15000ms) must be less than shutdownTimeout (10000ms): the delay is part of the shutdown budget"],
  [{ PORT: "70000" }, 'PORT must be an integer from 0 to 65535, got "70000"'],
])("the example started with %o exits 1 with one line: %s", async (env, reason) => {
  const child = spawnChild([process.execPath, "--import", "tsx", "examples/bookstore/main.ts"], {
    cwd: ROOT, env: { PORT: "0", NODE_ENV: "development", BOOKSTORE_DB: join(dir, "books.db"), ...env },
  });
  const exit = await Promise.race([child.exited, new Promise<"running">((done) => setTimeout(() => done("running"), 20_000))]);
  if (exit === "running") await child.stop();
  expect(exit === "running" ? "still running after 20 s" : exit.code, child.output()).toBe(1);
  const lines = child.output().trim().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(new RegExp(`^\\[ERROR\\] \\S+ \\S+ startup failed: ${reason.replaceAll(/[.*+?^${}()|[\]\\]/g, String.raw`\$&`)}$`));
});
