// A test's own temporary folder, gone once the test is over: a run leaves nothing in os.tmpdir().
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { onTestFinished } from "vitest";

/**
 * A new folder `<os.tmpdir()>/<prefix>XXXXXX`, removed with its contents when the calling test has
 * finished, passed or failed: after the file's afterEach hooks, so after they have stopped the
 * processes the test left running. In a test only (it throws elsewhere, before making anything): a
 * folder that outlives one test is made at the top level or in beforeAll and removed in afterAll.
 */
export function tempDir(prefix: string): string {
  let dir: string | undefined;
  onTestFinished(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });
  dir = mkdtempSync(join(tmpdir(), prefix));
  return dir;
}
