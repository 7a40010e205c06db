// `make run` as a developer uses it, in a copy of the repository: the first one builds, a second one with
// nothing changed starts serving within seconds of the first one's exit, and an edited or added source
// builds again. The copy keeps this checkout's dist/ out of the way of the suites that read it.
import { spawnSync } from "node:child_process";
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { delay, freePort, killAllChildren, spawnChild, type Exit } from "../../harness/child.js";
import { ROOT, run } from "./pack.js";

const SLOW = 600_000;
// A nested make must not inherit the flags of a `make test NODE_VERSION=…` this suite may run under.
const { MAKEFLAGS: _flags, MFLAGS: _mflags, MAKELEVEL: _level, ...cleanEnv } = process.env;
// The Node running this suite stands in for the pinned one: the copy never downloads a Node.
const MAKE_ARGS = ["--no-print-directory", `NODE_VERSION=${process.versions.node}`];
const BUILD_LINE = /^npm run build$/m;

let copy: string;

beforeAll(async () => {
  copy = mkdtempSync(join(tmpdir(), "keelson-make-run-"));
  await run("sh", ["-c", `tar --exclude=./node_modules --exclude=./dist --exclude=./.git --exclude=./.cache --exclude=./data -cf - . | tar -xf - -C "${copy}"`], ROOT);
  symlinkSync(join(ROOT, "node_modules"), join(copy, "node_modules"), "dir");
}, SLOW);

afterEach(() => killAllChildren());

afterAll(() => {
  if (copy) rmSync(copy, { recursive: true, force: true });
});

/** `make run` with one worker until its ready line; resolves with its output and its exit (after SIGTERM). */
async function makeRun(): Promise<{ output: string; ready: number; exit: Exit }> {
  const port = await freePort();
  const service = spawnChild(["make", ...MAKE_ARGS, "run", "WORKERS=1", `PORT=${port}`], {
    cwd: copy, group: true, env: { ...cleanEnv, KEELSON_METRICS_PORT: "0" }, inheritEnv: false,
  });
  try {
    await service.waitFor(/1 worker\(s\) ready in \d+ms/, { timeoutMs: 300_000 });
    const ready = performance.now();
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);
    service.kill("SIGTERM", { all: true });
    return { output: service.output(), ready, exit: await service.exited };
  } finally {
    if (service.alive()) service.kill("SIGKILL", { all: true });
  }
}

/** What `make build` would run now, without running it. */
const dryBuild = () => spawnSync("make", [...MAKE_ARGS, "-n", "build"], { cwd: copy, encoding: "utf8", env: cleanEnv }).stdout;

describe("make run", () => {
  it("builds once; a second run with nothing changed serves within 10 s of the first one's exit; an edit builds again", async () => {
    const first = await makeRun();
    expect(first.output).toMatch(BUILD_LINE);

    const second = await makeRun();
    expect(second.output).not.toMatch(BUILD_LINE);
    expect(second.ready - first.exit.at).toBeLessThan(10_000);
    expect(dryBuild()).not.toMatch(BUILD_LINE);

    // An edited source: built again, and the new output is what runs.
    const marker = `rebuilt-${process.pid}`;
    appendFileSync(join(copy, "examples", "bookstore", "main.ts"), `\nexport const buildMarker = "${marker}";\n`);
    const third = await makeRun();
    expect(third.output).toMatch(BUILD_LINE);
    expect(readFileSync(join(copy, "dist", "examples", "bookstore", "main.js"), "utf8")).toContain(marker);
    expect(dryBuild()).not.toMatch(BUILD_LINE);
  }, SLOW);

  it("builds again when a source is added or removed (its folder changed), or the Node major is another", async () => {
    expect(existsSync(join(copy, "dist")), "the first test built dist/").toBe(true);
    expect(dryBuild()).not.toMatch(BUILD_LINE);
    const added = join(copy, "src", "added-for-the-test.ts");
    writeFileSync(added, "export const added = 1;\n");
    expect(dryBuild()).toMatch(BUILD_LINE);
    // As if built with it (file times are coarse: the removal must come a tick later than the stamp).
    const stamp = join(copy, "dist", `.built-node${process.versions.node.split(".")[0]}`);
    expect(existsSync(stamp)).toBe(true);
    utimesSync(stamp, new Date(), new Date());
    expect(dryBuild()).not.toMatch(BUILD_LINE);
    await delay(50);
    rmSync(added);
    expect(dryBuild()).toMatch(BUILD_LINE);
    const otherMajor = spawnSync("make", ["--no-print-directory", "NODE_VERSION=1.0.0", "-n", "build"], { cwd: copy, encoding: "utf8", env: cleanEnv });
    expect(otherMajor.stdout).toMatch(BUILD_LINE);
  });
});
