// `keelson bundle` as a user runs it: the built CLI bundles a service entry, and the bundle starts
// under its own supervisor with real workers, serves the docs page's Scalar bundle from beside it,
// keeps one copy of a package imported both statically and with import(), and stops on SIGTERM.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { freePort, killAllChildren, spawnChild } from "../harness/child.js";

const ROOT = resolve(import.meta.dirname, "..");
const CLI = join(ROOT, "dist", "cli", "cli.js");
const FIXTURE = "test/fixtures/bundle-service.mjs";
const scratch = mkdtempSync(join(tmpdir(), "keelson-bundle-"));

const bundle = (...args: string[]) => spawnSync(process.execPath, [CLI, "bundle", ...args], { cwd: ROOT, encoding: "utf8", timeout: 120_000 });

afterEach(() => killAllChildren());
const scratchDirs = [scratch];
afterAll(() => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

describe("keelson bundle", () => {
  it("answers usage errors with exit 2 and a one-line reason", () => {
    expect(bundle("--help").stdout).toMatch(/^Usage: keelson bundle <entry>/);
    for (const [args, reason] of [
      [[], /missing <entry>/],
      [["dist/no-such-entry.js"], /dist\/no-such-entry\.js does not exist/],
      [["cli/cli.ts", "extra"], /unexpected argument\(s\): extra/],
      [[join(scratch, "keelson.js")], /an entry named "keelson" would overwrite/],
    ] as const) {
      if (args[0]?.endsWith("keelson.js") === true) writeFileSync(args[0], "");
      const result = bundle(...args);
      expect([result.status, result.stderr], args.join(" ")).toEqual([2, expect.stringMatching(reason)]);
    }
  });

  it("never empties a folder that is not an earlier bundle", () => {
    const out = join(scratch, "not-a-bundle");
    mkdirSync(out);
    writeFileSync(join(out, "notes.txt"), "mine");
    const result = bundle(FIXTURE, "--out", out);
    expect([result.status, result.stderr]).toEqual([1, expect.stringMatching(/is neither empty nor an earlier keelson bundle/)]);
    expect(readdirSync(out)).toEqual(["notes.txt"]);
  });

  it("writes a bundle that runs under its own supervisor: docs assets beside it, one copy of each package, exit 0 on SIGTERM", async () => {
    // Inside the checkout: what the bundle leaves to node_modules (import()ed packages) resolves from there.
    const out = mkdtempSync(join(ROOT, "dist", "bundle-test-"));
    scratchDirs.push(out);
    const first = bundle(FIXTURE, "--out", out);
    expect(first.status, first.stderr).toBe(0);
    // Bundling again over the earlier bundle replaces it (no stale chunks left behind).
    const stale = join(out, "chunk-STALE.mjs");
    writeFileSync(stale, "");
    const result = bundle(FIXTURE, "--out", out);
    expect(result.status, result.stderr).toBe(0);
    expect(existsSync(stale)).toBe(false);
    expect(result.stdout).toMatch(/loaded from node_modules, being imported with import\(\) too: prom-client/);
    const shown = relative(ROOT, out);
    expect(result.stdout).toContain(`start it: node ${join(shown, "keelson.mjs")} start ${join(shown, "bundle-service.mjs")}`);
    for (const file of ["keelson.mjs", "worker-preload.mjs", "bundle-service.mjs", "keelson.mjs.map"]) expect(existsSync(join(out, file)), file).toBe(true);
    expect(statSync(join(out, "vendor", "scalar-standalone.js")).size).toBeGreaterThan(1_000_000);
    expect(existsSync(join(out, "vendor", "scalar-standalone.LICENSE.txt"))).toBe(true);

    const port = await freePort();
    const service = spawnChild([process.execPath, join(out, "keelson.mjs"), "start", join(out, "bundle-service.mjs"), "--workers", "2"], {
      cwd: ROOT, env: { PORT: String(port), KEELSON_METRICS_PORT: String(await freePort()) },
    });
    await service.waitFor(/2 worker\(s\) ready/, { timeoutMs: 60_000 });
    const base = `http://127.0.0.1:${port}`;
    expect((await fetch(`${base}/health`)).status).toBe(200);
    expect(await (await fetch(`${base}/registries`)).json()).toEqual({ same: true, named: true });
    expect(await (await fetch(`${base}/docs`)).text()).toContain('script.src = base + "/scalar.js?v=');
    const asset = await fetch(`${base}/docs/scalar.js`);
    expect([asset.status, (await asset.arrayBuffer()).byteLength > 1_000_000]).toEqual([200, true]);
    service.kill("SIGTERM");
    expect(await service.exited, service.output()).toMatchObject({ code: 0 });
    expect(service.output()).toMatch(/2 worker\(s\) exited cleanly/);
  }, 180_000);
});
