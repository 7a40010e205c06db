import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { freePort, spawnChild, type Child } from "../harness/child.js";

// The CLI's runtime setup, through the real CLI with cwd in a temp folder (where `.env` is looked for):
// `.env` loading, and the compile cache turned on for the supervisor and inherited by its workers.

const ROOT = resolve(import.meta.dirname, "..");
const TSX = pathToFileURL(join(ROOT, "node_modules/tsx/dist/loader.mjs")).href;
const temps: string[] = [];
const running: Child[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "keelson-runtime-"));
  temps.push(dir);
  return dir;
}

/** `keelson start test/fixtures/runtime-app.ts --workers 1` in `cwd`, with TMPDIR there too (the cache's default home). */
function startCli(cwd: string, env: Record<string, string> = {}): Child {
  const started = spawnChild(
    [process.execPath, "--import", TSX, join(ROOT, "cli/cli.ts"), "start", join(ROOT, "test/fixtures/runtime-app.ts"), "--workers", "1"],
    {
      cwd,
      group: true,
      env: { NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined, PORT: undefined, KEELSON_DOTENV_PROBE: undefined, NODE_ENV: "development", TMPDIR: cwd, ...env },
    },
  );
  running.push(started);
  return started;
}

async function readRuntime(port: number): Promise<{ compileCache: string | null; fromDotEnv: string | null }> {
  const response = await fetch(`http://127.0.0.1:${port}/runtime`);
  expect(response.status).toBe(200);
  return (await response.json()) as { compileCache: string | null; fromDotEnv: string | null };
}

afterEach(async () => {
  for (const started of running.splice(0)) await started.stop();
});

afterAll(() => {
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

describe("keelson start: .env", () => {
  it("loads an optional .env from the working directory, for the supervisor (PORT) and its workers", async () => {
    const cwd = tempDir();
    const port = await freePort();
    writeFileSync(join(cwd, ".env"), `# local settings\nPORT=${port}\nKEELSON_DOTENV_PROBE="from the file"\n`);
    const cli = startCli(cwd);
    await cli.waitFor(/ready on/);
    expect((await readRuntime(port)).fromDotEnv).toBe("from the file");
  });

  it("lets a variable already in the environment win over the file", async () => {
    const cwd = tempDir();
    const port = await freePort();
    writeFileSync(join(cwd, ".env"), `PORT=${port + 1}\nKEELSON_DOTENV_PROBE=file\n`);
    const cli = startCli(cwd, { PORT: String(port), KEELSON_DOTENV_PROBE: "environment" });
    await cli.waitFor(/ready on/);
    expect((await readRuntime(port)).fromDotEnv).toBe("environment");
  });

  it("starts without a .env, and refuses to start on one it cannot read (exit 2, says why)", async () => {
    const cwd = tempDir();
    const port = await freePort();
    const plain = startCli(cwd, { PORT: String(port) });
    await plain.waitFor(/ready on/);
    expect((await readRuntime(port)).fromDotEnv).toBeNull();

    const broken = tempDir();
    mkdirSync(join(broken, ".env"));
    const cli = startCli(broken, { PORT: String(await freePort()) });
    expect((await cli.exited).code).toBe(2);
    expect(cli.output()).toMatch(/keelson: cannot load .*\.env/);
  });
});

describe("keelson start: compile cache", () => {
  it("is on by default in <tmpdir>/node-compile-cache, for the workers too", async () => {
    const cwd = tempDir();
    const port = await freePort();
    const cli = startCli(cwd, { PORT: String(port) });
    await cli.waitFor(/ready on/);
    const { compileCache } = await readRuntime(port);
    expect(compileCache?.startsWith(join(cwd, "node-compile-cache") + "/")).toBe(true);
    expect((await cli.stop()).code).toBe(0);
    // Written when the processes exit: the next start reads it.
    expect(readdirSync(compileCache ?? "").length).toBeGreaterThan(0);
  });

  it("respects NODE_COMPILE_CACHE and NODE_DISABLE_COMPILE_CACHE", async () => {
    const cwd = tempDir();
    const port = await freePort();
    const chosen = startCli(cwd, { PORT: String(port), NODE_COMPILE_CACHE: join(cwd, "chosen") });
    await chosen.waitFor(/ready on/);
    expect((await readRuntime(port)).compileCache?.startsWith(join(cwd, "chosen") + "/")).toBe(true);

    const other = await freePort();
    const off = startCli(tempDir(), { PORT: String(other), NODE_DISABLE_COMPILE_CACHE: "1" });
    await off.waitFor(/ready on/);
    expect((await readRuntime(other)).compileCache).toBeNull();
  });

  it("warns in the supervisor's log when its folder cannot be created, and starts anyway", async () => {
    const cwd = tempDir();
    const port = await freePort();
    writeFileSync(join(cwd, "a-file"), "");
    const cli = startCli(cwd, { PORT: String(port), NODE_COMPILE_CACHE: join(cwd, "a-file", "cache") });
    await cli.waitFor(/ready on/);
    expect(cli.lines(/compile cache off \(set NODE_COMPILE_CACHE to a writable folder\)/)).toHaveLength(1);
    expect((await readRuntime(port)).compileCache).toBeNull();
  });
});
