import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { builtinModules, createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { basename, join, relative, resolve } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { delay, freePort, killAllChildren, spawnChild, type Child } from "../../harness/child.js";
import { startPostgres } from "../helpers/postgres.js";
import {
  getBundleCommand, getHealthcheck, getImageCommand, getInstructions, getStageArgs, getStageEnv, readDockerfile, readMakeBuildRecipe, type Stage,
} from "./dockerfile.js";

// Runs the image's own command line on the host against the built package: ENTRYPOINT + CMD from
// docker/Dockerfile, /app mapped to the repository root, the image's ENV (plus a Deployment's or
// Compose's where a test says so), the supervisor as PID 1 of its own PID namespace like in a container.

const ROOT = resolve(import.meta.dirname, "..", "..");
const dockerfile = readDockerfile(join(ROOT, "docker/Dockerfile"));
const runtime = dockerfile.stages.at(-1) as Stage;
const workdir = getInstructions(runtime, "WORKDIR").at(-1)?.args ?? "/";
const imageEnv = getStageEnv(runtime);
/** `make build`'s keelson bundle line: the bundle the image runs is built from the example by it. */
const makeBundle = getBundleCommand(readMakeBuildRecipe(readFileSync(join(ROOT, "Makefile"), "utf8")));
const servers: Server[] = [];
const cleanups: (() => Promise<void>)[] = [];

/** An image path (`/app/dist/x.js`) as a path in this checkout. */
const toHost = (arg: string) => (arg === workdir ? ROOT : arg.startsWith(`${workdir}/`) ? join(ROOT, arg.slice(workdir.length + 1)) : arg);

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".d.ts"))
    .map((f) => join(dir, f));
}

/** Files of dist/ missing or older than their source. */
function staleOutputs(): string[] {
  return ["src", "supervisor", "cli", "examples"].flatMap(sourceFiles).filter((file) => {
    const out = join(ROOT, "dist", file.replace(/\.ts$/, ".js"));
    return !existsSync(out) || statSync(out).mtimeMs < statSync(join(ROOT, file)).mtimeMs;
  });
}

/** The bundle the image runs (make build: keelson bundle), when missing or older than a module it bundles. */
function staleBundle(): boolean {
  const bundle = join(ROOT, "dist", "bundle", "keelson.mjs");
  if (!existsSync(bundle)) return true;
  const built = statSync(bundle).mtimeMs;
  return ["src", "supervisor", "cli", "examples"].flatMap(sourceFiles).some((file) => statSync(join(ROOT, "dist", file.replace(/\.ts$/, ".js"))).mtimeMs > built);
}

beforeAll(() => {
  // `make test` builds first; a lone `vitest run` on a clean clone or after an edit builds here.
  if (staleOutputs().length > 0) {
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    const result = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: ROOT, encoding: "utf8" });
    const stale = staleOutputs();
    if (stale.length > 0) throw new Error(`build failed (${stale.join(", ")}):\n${result.stdout}${result.stderr}`);
  }
  if (staleBundle()) {
    const [, ...args] = makeBundle?.argv ?? [];
    const result = spawnSync(process.execPath, args, { cwd: ROOT, encoding: "utf8" });
    if (result.status !== 0 || staleBundle()) throw new Error(`keelson bundle failed:\n${result.stdout}${result.stderr}`);
  }
}, 180_000);

afterEach(async () => {
  killAllChildren();
  for (const server of servers.splice(0)) await new Promise((r) => server.close(r));
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

interface Started {
  child: Child;
  /** Host pid of the supervisor (PID 1 inside its namespace). */
  pid: number;
  url: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function childOf(pid: number): number | undefined {
  try {
    const first = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/)[0];
    return first ? Number(first) : undefined;
  } catch {
    return undefined;
  }
}

/** Runs the image command as PID 1 of a new PID namespace (as root, like `docker run`) with exactly `env`. */
async function startImage(env: Record<string, string>): Promise<Started> {
  const [program, ...args] = getImageCommand(runtime).map(toHost);
  expect(program).toBe("node");
  const child = spawnChild(["unshare", "--pid", "--fork", "--kill-child", "--", process.execPath, ...args], {
    cwd: toHost(workdir), env, inheritEnv: false,
  });
  const exited = child.exited.then(({ code, signal }) => ({ code, signal }));
  const started: Started = { child, pid: 0, url: `http://127.0.0.1:${env.PORT ?? ""}`, output: child.output, exited };
  // Polls /health the way a readiness probe does: that answer, not a log line, is what "up" means
  // here. The tests go on once every worker is up too: the first to listen answers the probe while
  // another may still be loading, and a worker signalled before it listens just exits.
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (!child.alive()) throw new Error(`exited before answering:\n${child.output()}`);
    if (Date.now() > deadline) throw new Error(`/health did not answer 200 within 30 s:\n${child.output()}`);
    started.pid ||= childOf(child.pid) ?? 0;
    const ok = await fetch(`${started.url}/health`).then((r) => r.status === 200, () => false);
    if (ok && started.pid) break;
    await delay(100);
  }
  await child.waitFor(/worker\(s\) ready in/, { timeoutMs: Math.max(1, deadline - Date.now()) });
  return started;
}

/** The image's HEALTHCHECK command, run with the container's environment. */
function runHealthcheck(env: Record<string, string>): number | null {
  const [, ...args] = getHealthcheck(runtime)?.exec ?? [];
  return spawnSync(process.execPath, args, { cwd: ROOT, env, timeout: 10_000 }).status;
}

function baseEnv(port: number, extra: Record<string, string> = {}): Record<string, string> {
  // Kernel-assigned ports, the metrics port too: a fixed one could be taken on the test machine.
  // Image paths in the ENV (NODE_COMPILE_CACHE) mapped like the command's: nothing is written outside the checkout.
  const env = Object.fromEntries(Object.entries(imageEnv).map(([name, value]) => [name, toHost(value)]));
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/", ...env, ...extra, PORT: String(port), KEELSON_METRICS_PORT: "0" };
}

describe("the image's start command, on the host", () => {
  it("answers /health, passes its own HEALTHCHECK, and exits 0 on SIGTERM as PID 1", async () => {
    const port = await freePort();
    const env = baseEnv(port, { WORKERS: "2" });
    const app = await startImage(env);
    // NSpid lists the pid in each namespace from the host down: the innermost one is 1.
    expect(readFileSync(`/proc/${app.pid}/status`, "utf8")).toMatch(/^NSpid:\s+\d+\s+1$/m);
    const health = (await (await fetch(`${app.url}/health`)).json()) as { status: string; service: string };
    expect(health).toMatchObject({ status: "UP", service: "bookstore" });
    expect(runHealthcheck(env)).toBe(0);
    process.kill(app.pid, "SIGTERM");
    expect(await app.exited, app.output()).toEqual({ code: 0, signal: null });
  });

  it("with the Deployment's environment: /health 503 during the shutdown delay, then exit 0 inside the grace period", async () => {
    const deployment = parse(readFileSync(join(ROOT, "docker/k8s/deployment.yaml"), "utf8")) as {
      spec: { template: { spec: { terminationGracePeriodSeconds: number; containers: { env: { name: string; value?: string }[]; resources: { limits: { cpu: string } } }[] } } };
    };
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    const env: Record<string, string> = {};
    for (const e of container?.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
    // The downward API's limits.cpu with divisor 1, as the kubelet resolves it (rounded up).
    env.WORKERS = String(Math.ceil(Number(container?.resources.limits.cpu)));
    const shutdownDelay = Number(env.KEELSON_SHUTDOWN_DELAY_MS);
    expect(shutdownDelay).toBeGreaterThan(0);
    const containerEnv = baseEnv(await freePort(), env);
    const app = await startImage(containerEnv);

    const signalled = Date.now();
    process.kill(app.pid, "SIGTERM");
    // The listener stays open and tells the probes to stop sending traffic: every worker says so
    // (the next request may reach any of them, and one busy a moment longer has not yet heard).
    const workers = Number(env.WORKERS);
    await app.child.waitUntil((output) => output.split("before closing the listener; /health answers 503 meanwhile").length > workers, {
      what: `all ${workers} workers waiting before closing the listener`,
    });
    const during = await fetch(`${app.url}/health`);
    expect(during.status).toBe(503);
    expect(((await during.json()) as { status: string }).status).toBe("DOWN");
    expect(runHealthcheck(containerEnv)).toBe(1);
    expect(Date.now() - signalled).toBeLessThan(shutdownDelay);

    const exit = await app.exited;
    const took = Date.now() - signalled;
    expect(exit, app.output()).toEqual({ code: 0, signal: null });
    expect(took).toBeGreaterThanOrEqual(shutdownDelay - 100);
    expect(took).toBeLessThan(pod.terminationGracePeriodSeconds * 1000);
  });

  it("with Compose's environment: /metrics answers and spans reach the OTLP endpoint before exit", async () => {
    const compose = parse(readFileSync(join(ROOT, "docker/compose.yaml"), "utf8")) as { services: Record<string, { build?: unknown; environment: Record<string, string> }> };
    const service = Object.values(compose.services).find((s) => s.build);
    const env = Object.fromEntries(Object.entries(service?.environment ?? {}).map(([k, v]) => [k, String(v).replace(/\$\{\w+:-([^}]*)\}/g, "$1")]));
    const bodies: string[] = [];
    const collector = createServer((req, res) => {
      let body = "";
      req.on("data", (d: Buffer) => (body += d.toString()));
      req.on("end", () => {
        if (req.method === "POST" && req.url === "/v1/traces") bodies.push(body);
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
    });
    servers.push(collector);
    await new Promise<void>((r) => collector.listen(0, "127.0.0.1", r));
    // Compose points at the trace backend's service name; here the backend is this fake collector.
    expect(new URL(env.OTEL_EXPORTER_OTLP_ENDPOINT ?? "").port).toBe("4318");
    env.OTEL_EXPORTER_OTLP_ENDPOINT = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
    // Likewise the database: Compose's points at its postgres service, here a real server of the test's own.
    const database = new URL(env.DATABASE_URL ?? "");
    expect([database.protocol, compose.services[database.hostname]]).toEqual(["postgres:", expect.anything()]);
    const pg = await startPostgres();
    cleanups.push(() => pg.stop());
    env.DATABASE_URL = await pg.createDatabase();
    const app = await startImage(baseEnv(await freePort(), env));

    expect(await (await fetch(`${app.url}/health`)).json()).toMatchObject({ status: "UP", checks: { database: "UP" } });
    expect((await fetch(`${app.url}/hello?name=compose`)).status).toBe(200);
    const metrics = await fetch(`${app.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^http_request_duration_seconds_count\{.*route="\/hello".*\} [1-9]/m);
    expect((await fetch(`${app.url}/docs/openapi.json`)).status).toBe(200);

    process.kill(app.pid, "SIGTERM");
    expect(await app.exited, app.output()).toEqual({ code: 0, signal: null });
    expect(bodies.join("\n")).toContain("GET /hello");
  });
});

describe("the image's compile cache", () => {
  it("is made by the compile-cache stage's start of the image's command, and the next start compiles nothing it covers", async () => {
    const stage = dockerfile.stages.find((s) => s.name === "compile-cache") as Stage;
    const run = getInstructions(stage, "RUN").find((r) => r.args.includes("warm-compile-cache.mjs"));
    expect(run, "the compile-cache stage runs scripts/warm-compile-cache.mjs").toBeDefined();
    // The stage's command, up to the `&&`: node warm-compile-cache.mjs <the image's command without node> [flags].
    const [node, script, ...args] = (run?.args.split("&&")[0] ?? "").trim().split(/\s+/);
    expect([node, script]).toEqual(["node", "warm-compile-cache.mjs"]);
    expect(args.slice(0, 3)).toEqual(getImageCommand(runtime).slice(1));
    const cache = mkdtempSync(join(tmpdir(), "keelson-compile-cache-"));
    cleanups.push(async () => rmSync(cache, { recursive: true, force: true }));
    const warm = spawnSync(process.execPath, [join(ROOT, "scripts", script ?? ""), ...args], {
      cwd: ROOT, encoding: "utf8", timeout: 150_000,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...getStageEnv(stage), NODE_COMPILE_CACHE: cache, PORT: String(await freePort()), KEELSON_METRICS_PORT: "0" },
    });
    expect(warm.status, warm.stdout + warm.stderr).toBe(0);

    // Node reports each module's cache lookup on stderr with NODE_DEBUG_NATIVE=COMPILE_CACHE: "V8 code
    // cache for ESM file://… was accepted" on Node 24 and later, "cache for file://… was accepted" on 22.
    const app = await startImage(baseEnv(await freePort(), { WORKERS: "1", NODE_COMPILE_CACHE: cache, NODE_DEBUG_NATIVE: "COMPILE_CACHE" }));
    process.kill(app.pid, "SIGTERM");
    expect(await app.exited, app.output()).toEqual({ code: 0, signal: null });
    const lookups = [...app.output().matchAll(/cache for (?:\w+ )?file:\/\/\S+?\/(dist\/\S+|node_modules\/\S+) (was accepted|was not initialized|was rejected)/g)];
    const accepted = lookups.filter((m) => m[2] === "was accepted").map((m) => m[1] ?? "");
    // The image runs the bundle: its entries and shared chunks, no module of dist/src or of h3 on its own.
    expect(accepted).toEqual(expect.arrayContaining(["dist/bundle/keelson.mjs", "dist/bundle/worker-preload.mjs", "dist/bundle/main.mjs"]));
    expect(accepted.filter((file) => file.startsWith("dist/bundle/chunk-")).length).toBeGreaterThan(0);
    expect(accepted.filter((file) => file.startsWith("dist/src/") || file.startsWith("node_modules/h3/"))).toEqual([]);
    expect(lookups.filter((m) => m[2] !== "was accepted").map((m) => m[1])).toEqual([]);
  }, 240_000);
});

describe("the runtime image's packages", () => {
  it("cover every package the built service imports, and nothing listed goes unused", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    const deps = dockerfile.stages.find((s) => getInstructions(s, "RUN").some((r) => r.args.includes("--omit=dev"))) as Stage;
    const extra = (getStageArgs(deps).EXAMPLE_PACKAGES ?? "").split(/\s+/).filter(Boolean);
    const builtins = new Set(builtinModules);
    const imported = new Map<string, string>();
    // The image's entry is the bundle of the example's built entry (make build: keelson bundle <entry>).
    const entry = makeBundle?.entry ?? "";
    expect(getImageCommand(runtime)[3]).toBe(`dist/bundle/${basename(entry, ".js")}.mjs`);
    // Everything the image's entry can load: the framework, the supervisor and the example's folder. The bundle
    // holds most packages itself, but the image ships node_modules for what it loads at run time (croner) and so
    // that the unbundled entry runs too.
    for (const dir of ["dist/src", "dist/supervisor", relative(ROOT, join(ROOT, entry, ".."))]) {
      // Compiled modules only (a .ts source beside them), not assets such as the docs page's browser bundle.
      // Not the one-shot commands' modules (keelson client, keelson new, keelson bundle): cli/tools.ts loads them
      // on demand, and the image's entry (keelson start) never runs those commands.
      const modules = readdirSync(join(ROOT, dir), { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".js") && existsSync(join(ROOT, relative("dist", dir), f.replace(/\.js$/, ".ts"))))
        .filter((f) => !(dir === "dist/supervisor" && ["client-command.js", "new-command.js", "bundle-command.js"].includes(f)));
      expect(modules.length, dir).toBeGreaterThan(0);
      for (const file of modules) {
        const code = readFileSync(join(ROOT, dir, file), "utf8");
        // Not "--import" in an argv list: an import is a keyword, so no dash or word character before it.
        for (const m of code.matchAll(/(?:\bfrom\s*|(?<![-\w.])import\s*\(?\s*)["']([^"'.\s][^"'\s]*)["']/g)) {
          const spec = m[1] ?? "";
          if (spec.startsWith("node:") || builtins.has(spec)) continue;
          const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : (spec.split("/")[0] ?? spec);
          imported.set(name, join(dir, file));
        }
      }
    }
    const installed = new Set([...Object.keys(pkg.dependencies), ...extra]);
    for (const [name, file] of imported) expect(installed.has(name), `${name} (imported by ${file}) is not installed in the image`).toBe(true);
    for (const name of extra) expect(imported.has(name), `${name} is installed in the image but never imported`).toBe(true);
  });
});
