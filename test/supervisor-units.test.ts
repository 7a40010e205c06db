// The supervisor's pure parts in-process (options, command line, backoff, breaker, the handoff guard with fake workers), and the
// CLI's usage paths as a process.
import { spawnSync } from "node:child_process";
import type { Worker } from "node:cluster";
import { EventEmitter } from "node:events";
import { closeSync, openSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { Backoff, CrashBreaker } from "../supervisor/backoff.js";
import { parseStart } from "../cli/args.js";
import { parseControlCommand } from "../cli/control-command.js";
import { unknownCommand } from "../cli/verbs.js";
import { defaultControlSocket } from "../supervisor/control-path.js";
import { readWorkersEnv, resolveOptions } from "../supervisor/options.js";
import { relayOutput } from "../supervisor/output-relay.js";
import { guardHandoffs } from "../supervisor/handoff-guard.js";
import { forkSettings, ROUND_ROBIN_SEMI_SPACE_MB } from "../supervisor/worker-process.js";
import { tempDir } from "./helpers/temp-dir.js";

const ENTRY = "test/fixtures/supervisor-app.ts";
const ROOT = join(import.meta.dirname, "..");

/** The message of a usage error of `keelson start|status|reload …` (or says there was none). */
function usageError(argv: string[], env: NodeJS.ProcessEnv = {}): string {
  const [verb, ...rest] = argv;
  if (verb === "status" || verb === "reload") {
    try {
      parseControlCommand(verb, rest, env);
      return "no error";
    } catch (error) {
      return (error as Error).message;
    }
  }
  const cli = parseStart(rest, env);
  return cli.command === "error" ? cli.message : `no error: ${cli.command}`;
}

/** The parsed `keelson status|reload …`. */
function control(argv: string[], env: NodeJS.ProcessEnv = {}) {
  const [verb, ...rest] = argv;
  return parseControlCommand(verb as "status" | "reload", rest, env);
}

function runCli(...args: string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", "cli/cli.ts", ...args], {
    cwd: ROOT, encoding: "utf8", env: { ...process.env, WORKERS: "", PORT: "" },
  });
}

describe("supervisor options", () => {
  it("documents its defaults", () => {
    const saved = {
      WORKERS: process.env.WORKERS, WEB_CONCURRENCY: process.env.WEB_CONCURRENCY,
      KEELSON_METRICS_PORT: process.env.KEELSON_METRICS_PORT, KEELSON_METRICS_HOST: process.env.KEELSON_METRICS_HOST,
    };
    for (const name of Object.keys(saved)) delete process.env[name];
    try {
      const options = resolveOptions({ entry: ENTRY });
      expect(options).toMatchObject({
        workers: availableParallelism(), port: undefined, args: [], execArgv: process.execArgv, readyTimeout: 30_000,
        shutdownTimeout: 10_000, killMargin: 1000, heartbeatInterval: 1000, watchdogTimeout: 10_000,
        backoff: { initial: 100, max: 10_000, resetAfter: 30_000 }, crashLoop: { maxCrashes: 10, window: 60_000 },
        handleSignals: true, exitProcess: true, metricsPort: 9464, metricsHost: undefined,
      });
    } finally {
      for (const [name, value] of Object.entries(saved)) if (value !== undefined) process.env[name] = value;
    }
  });

  it("reads WORKERS, then WEB_CONCURRENCY, and rejects a bad count", () => {
    expect(readWorkersEnv({ WORKERS: "4", WEB_CONCURRENCY: "8" })).toBe(4);
    expect(readWorkersEnv({ WEB_CONCURRENCY: "3" })).toBe(3);
    expect(readWorkersEnv({ WORKERS: "" })).toBeUndefined();
    expect(() => readWorkersEnv({ WORKERS: "two" })).toThrow("WORKERS must be a positive integer");
    expect(() => readWorkersEnv({ WORKERS: "0" })).toThrow("WORKERS must be a positive integer");
  });

  it("rejects values that cannot work", () => {
    expect(() => resolveOptions({ entry: ENTRY, workers: 1.5 })).toThrow("workers must be a positive integer");
    expect(() => resolveOptions({ entry: ENTRY, port: 70_000 })).toThrow("port must be an integer from 0 to 65535");
    expect(() => resolveOptions({ entry: ENTRY, watchdogTimeout: 500, heartbeatInterval: 1000 })).toThrow("must exceed heartbeatInterval");
    expect(resolveOptions({ entry: ENTRY, watchdogTimeout: 0 }).watchdogTimeout).toBe(0);
    expect(() => resolveOptions({ entry: ENTRY, metricsPort: -1 })).toThrow("metricsPort must be an integer from 0 to 65535, got -1");
    expect(resolveOptions({ entry: ENTRY, metricsPort: false }).metricsPort).toBe(false);
  });
});

/** The workers' Node options for this balancer, these options and this extra environment. */
const settings = (balancer: "round-robin" | "reuseport", execArgv: string[], env: Record<string, string> = {}) =>
  forkSettings({ entry: ENTRY, args: [], execArgv, balancer, env }).execArgv ?? [];

describe("the workers' young generation", () => {
  const CAP = `--max-semi-space-size=${ROUND_ROBIN_SEMI_SPACE_MB}`;

  it("caps a round-robin worker's semi-spaces after the user's options and before the preload", () => {
    const argv = settings("round-robin", ["--import", "tsx"]);
    expect(argv.slice(0, 3)).toEqual(["--import", "tsx", CAP]);
    expect(argv.at(-1)).toMatch(/^--import=file:.*worker-preload\.(ts|js)$/);
  });

  it("leaves a reuseport worker at V8's default", () => {
    expect(settings("reuseport", []).some((arg) => arg.includes("semi-space"))).toBe(false);
  });

  it("keeps the user's own young-generation option, in execArgv or in NODE_OPTIONS, whatever its spelling", () => {
    for (const own of ["--max-semi-space-size=64", "--max_semi_space_size=8", "--min-semi-space-size=4", "--max-young-generation-size=96"]) {
      expect(settings("round-robin", [own])).not.toContain(CAP);
      expect(settings("round-robin", [], { NODE_OPTIONS: `--enable-source-maps ${own}` })).not.toContain(CAP);
    }
    const saved = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = "--max-semi-space-size=32";
    try {
      expect(settings("round-robin", [])).not.toContain(CAP);
      // The workers' own environment is what they start with: it overrides the primary's.
      expect(settings("round-robin", [], { NODE_OPTIONS: "--enable-source-maps" })).toContain(CAP);
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
  });
});

describe("the workers' allocation-site pretenuring", () => {
  const OFF = "--no-allocation-site-pretenuring";

  it("turns it off for a worker of either balancer, after the user's options and before the preload", () => {
    for (const balancer of ["round-robin", "reuseport"] as const) {
      const argv = settings(balancer, ["--import", "tsx"]);
      expect(argv.filter((arg) => arg === OFF)).toHaveLength(1);
      expect(argv.indexOf(OFF)).toBeGreaterThan(argv.indexOf("tsx"));
      expect(argv.at(-1)).toMatch(/^--import=file:.*worker-preload\.(ts|js)$/);
    }
  });

  it("keeps the user's own choice, either way and in any spelling, in execArgv or in NODE_OPTIONS", () => {
    for (const own of ["--allocation-site-pretenuring", "--no-allocation-site-pretenuring", "--no_allocation_site_pretenuring"]) {
      expect(settings("round-robin", [own]).filter((arg) => arg.includes("pretenuring"))).toEqual([own]);
      expect(settings("reuseport", [], { NODE_OPTIONS: `--enable-source-maps ${own}` })).not.toContain(OFF);
    }
    // The two choices are made apart: sizing the young generation leaves this one to keelson.
    expect(settings("round-robin", ["--max-semi-space-size=64"])).toContain(OFF);
  });
});

describe("supervisor command line", () => {
  it("parses start with every flag and passes arguments after -- to the entry", () => {
    const cli = parseStart([ENTRY, "-w", "3", "--port", "8080", "--ready-timeout", "5000", "--watchdog-timeout", "0",
      "--backoff-initial", "50", "--max-crashes", "7", "--crash-window", "1000", "--", "--verbose", "x"], {});
    expect(cli).toMatchObject({
      command: "start",
      options: {
        entry: ENTRY, workers: 3, port: 8080, readyTimeout: 5000, watchdogTimeout: 0, args: ["--verbose", "x"],
        backoff: { initial: 50 }, crashLoop: { maxCrashes: 7, window: 1000 },
      },
    });
  });

  it("takes WORKERS and PORT from the environment when the flags are absent", () => {
    expect(parseStart([ENTRY], { WORKERS: "2", PORT: "4000" })).toMatchObject({ options: { workers: 2, port: 4000 } });
    expect(parseStart([ENTRY, "--workers", "5"], { WORKERS: "2" })).toMatchObject({ options: { workers: 5 } });
  });

  it("takes the metrics port and address from flags, else KEELSON_METRICS_PORT / KEELSON_METRICS_HOST; off turns it off", () => {
    expect(parseStart([ENTRY, "--metrics-port", "9100", "--metrics-host", "10.1.2.3"], {}))
      .toMatchObject({ options: { metricsPort: 9100, metricsHost: "10.1.2.3" } });
    expect(parseStart([ENTRY, "--metrics-port", "off"], { KEELSON_METRICS_PORT: "9100" })).toMatchObject({ options: { metricsPort: false } });
    expect(parseStart([ENTRY], { KEELSON_METRICS_PORT: "0", KEELSON_METRICS_HOST: "::1" }))
      .toMatchObject({ options: { metricsPort: 0, metricsHost: "::1" } });
    expect(parseStart([ENTRY], {})).toMatchObject({ options: { metricsPort: undefined, metricsHost: undefined } });
    expect(usageError(["start", ENTRY, "--metrics-port", "metrics"])).toBe('--metrics-port must be a port from 0 to 65535, or off, got "metrics"');
    expect(usageError(["start", ENTRY], { KEELSON_METRICS_PORT: "99999" })).toBe('KEELSON_METRICS_PORT must be a port from 0 to 65535, or off, got "99999"');
  });

  it("answers help and names what is wrong otherwise", () => {
    expect(unknownCommand("run")).toBe('unknown command "run" (expected one of: start, dev, ls, status, reload, client, new, bundle)');
    expect(usageError(["start"])).toMatch(/^missing <entry>/);
    expect(usageError(["start", "nope.ts"])).toMatch(/^entry not found: .*nope\.ts$/);
    expect(usageError(["start", ENTRY, "--workers", "x"])).toBe('--workers must be an integer >= 1, got "x"');
    expect(usageError(["start", ENTRY, "--bogus"])).toMatch(/bogus/);
    expect(usageError(["start", ENTRY, "extra"])).toMatch(/unexpected argument\(s\): extra/);
    expect(usageError(["start", ENTRY], { PORT: "http" })).toBe('PORT must be an integer from 0 to 65535, got "http"');
  });

  it("status and reload: the socket of this folder and PORT unless --socket or KEELSON_CONTROL_SOCKET names one", () => {
    const here = defaultControlSocket(process.cwd(), 4000, {});
    // Nothing names it: the one of this folder, whatever its port (found at run time); this socket is the fallback.
    expect(control(["status"], { PORT: "4000" })).toEqual({ command: "status", socket: here, here: true, envPort: 4000, json: false, watchMs: undefined });
    expect(control(["status", "--port", "4000"]).here).toBeUndefined();
    expect(control(["status", "-p", "4000", "--json"])).toMatchObject({ socket: here, json: true });
    expect(control(["status"]).socket).toBe(defaultControlSocket(process.cwd(), 3000, {}));
    expect(control(["status", "--port", "4001"]).socket).not.toBe(here);
    expect(control(["status", "--watch"]).watchMs).toBe(2000);
    expect(control(["status", "--interval", "500"]).watchMs).toBe(500);
    expect(control(["reload", "--socket", "/run/x.sock"], { KEELSON_CONTROL_SOCKET: "/run/y.sock" }).socket).toBe("/run/x.sock");
    expect(control(["reload"], { KEELSON_CONTROL_SOCKET: "/run/y.sock" })).toEqual({ command: "reload", socket: "/run/y.sock", json: false, watchMs: undefined });
    expect(defaultControlSocket("/srv/a", 3000, { XDG_RUNTIME_DIR: "/run/user/1000" })).toMatch(/^\/run\/user\/1000\/keelson\/[0-9a-f]{16}\.sock$/);
    expect(usageError(["reload", "--watch"])).toBe("--watch and --interval are for keelson status");
    expect(usageError(["status", "--port", "http"])).toBe('--port expects an integer from 0 to 65535, got "http"');
    expect(usageError(["status", "--interval", "5"])).toBe('--interval expects milliseconds >= 100, got "5"');
    expect(usageError(["status", "extra", "more"])).toBe("unexpected argument(s): more (name one supervisor)");
    expect(usageError(["status", "3000", "--port", "3000"])).toBe('name the supervisor one way: "3000", --socket or --port');
  });

  it("as a process: --help exits 0, a usage error exits 2 with one line on stderr", () => {
    const help = runCli("--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^Usage: keelson <command> …\n\nCommands:\n/);
    const start = runCli("start", "--help");
    expect(start.stdout).toMatch(/^Usage: keelson start <entry> \[options\]/);
    // `npm bin` was removed in npm 9; npx resolves the local bin on every npm since 7.
    expect(start.stdout).not.toContain("npm bin");
    expect(start.stdout).toContain('NODE_OPTIONS="--import tsx" npx keelson start app.ts');
    const bad = runCli("start", "missing-entry.ts");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/^keelson: entry not found: .*missing-entry\.ts\nRun "keelson start --help" for usage\.\n$/);
    const zero = runCli("start", ENTRY, "--workers", "0");
    expect(zero.status).toBe(2);
    expect(zero.stderr).toBe('keelson: --workers must be an integer >= 1, got "0"\nRun "keelson start --help" for usage.\n');
    const unknown = runCli("run", ENTRY);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe(`keelson: ${unknownCommand("run")}\nRun "keelson --help" for usage.\n`);
  });
});

describe("backoff and crash breaker", () => {
  it("doubles from initial up to max, and starts over after a stable period", () => {
    const backoff = new Backoff({ initial: 100, max: 1000, resetAfter: 30_000 });
    expect([0, 0, 0, 0, 0, 0].map((uptime) => backoff.delay(uptime))).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(backoff.delay(29_999)).toBe(1000);
    expect(backoff.delay(30_000)).toBe(100);
    expect(backoff.delay(5)).toBe(200);
  });

  it("trips at maxCrashes within the window, forgetting older crashes", () => {
    const breaker = new CrashBreaker({ maxCrashes: 3, window: 1000 });
    expect(breaker.record(0)).toBe(false);
    expect(breaker.record(500)).toBe(false);
    expect(breaker.record(1200)).toBe(false);
    expect(breaker.count).toBe(2);
    expect(breaker.record(1400)).toBe(true);
  });
});

/** A relay from a PassThrough into a fresh file: `read()` is what the file holds, `close()` ends the stream and waits for the relay. */
function relayToFile() {
  const path = join(tempDir("keelson-relay-"), "out");
  const fd = openSync(path, "w");
  const stream = new PassThrough();
  const relayed = relayOutput(stream, fd);
  const read = () => readFileSync(path, "utf8");
  const close = async () => {
    stream.end();
    await relayed.done;
    closeSync(fd);
    return read();
  };
  return { stream, relayed, read, close };
}

/** One turn of the event loop: what a relay passes on in it has reached the file. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

/** Feeds `chunks` through a relay into a file; returns what the file got after each chunk and at the end. */
async function relay(chunks: Array<string | Buffer>): Promise<{ steps: string[]; final: string }> {
  const { stream, read, close } = relayToFile();
  const steps: string[] = [];
  for (const chunk of chunks) {
    stream.write(chunk);
    await turn();
    steps.push(read());
  }
  return { steps, final: await close() };
}

/** A connection handle as node:cluster's round-robin handle passes it: fd -1 once closed. */
class FakeHandle {
  fd = 7;
  closes = 0;
  close(): void {
    this.fd = -1;
    this.closes++;
  }
}

/** A worker whose `process.send` records what the guard passes through; `exit()` ends it with its channel read. */
function fakeWorker() {
  const child = Object.assign(new EventEmitter(), {
    connected: true,
    sent: [] as unknown[],
    send(message: unknown, handle?: unknown): boolean {
      child.sent.push([message, handle]);
      return true;
    },
  });
  const worker = { process: child } as unknown as Worker;
  const exit = () => {
    child.connected = false;
    child.emit("exit", 0, null);
  };
  return { worker, child, exit };
}

const NEWCONN = { cmd: "NODE_CLUSTER", act: "newconn", key: "k" };

describe("handoff guard", () => {
  it("passes every message on, and tracks only the connections handed over", () => {
    const { worker, child } = fakeWorker();
    const guard = guardHandoffs(worker);
    const handle = new FakeHandle();
    child.send({ cmd: "other" });
    expect(guard.lastHandoff()).toBeUndefined();
    child.send(NEWCONN, handle);
    expect(child.sent).toEqual([[{ cmd: "other" }, undefined], [NEWCONN, handle]]);
    expect(guard.oldestPending()).toBe(guard.lastHandoff()?.at);
  });

  it("forgets a connection once the worker took it (the handle closed), keeping only the ones in flight", () => {
    const { worker, child, exit } = fakeWorker();
    const guard = guardHandoffs(worker);
    const handles = Array.from({ length: 200 }, () => new FakeHandle());
    for (const handle of handles) {
      child.send(NEWCONN, handle);
      handle.close(); // acknowledged: the round-robin handle closes its copy
    }
    expect(guard.oldestPending()).toBeUndefined();
    const waiting = new FakeHandle();
    child.send(NEWCONN, waiting);
    const at = guard.lastHandoff()?.at;
    expect(guard.oldestPending()).toBe(at);
    exit();
    expect(waiting.closes).toBe(1);
    expect(handles.every((handle) => handle.closes === 1)).toBe(true);
  });

  it("at the worker's exit closes what it never took, but not a connection it refused that went to another worker", () => {
    const a = fakeWorker();
    const b = fakeWorker();
    const guardA = guardHandoffs(a.worker);
    const guardB = guardHandoffs(b.worker);
    const refused = new FakeHandle();
    const neverTaken = new FakeHandle();
    a.child.send(NEWCONN, refused);
    // A refuses it (shutting down); the round-robin handle hands it to B, which has not answered yet.
    b.child.send(NEWCONN, refused);
    a.child.send(NEWCONN, neverTaken);
    expect(guardA.oldestPending()).toBe(guardA.lastHandoff()?.at);
    expect(guardB.oldestPending()).toBe(guardB.lastHandoff()?.at);
    expect(guardB.lastHandoff()?.othersSince).toBe(1);
    a.exit();
    expect(neverTaken.closes).toBe(1);
    expect(refused.closes).toBe(0);
    b.exit();
    expect(refused.closes).toBe(1);
  });

  it("waits for the channel's end after the exit before it releases (acknowledgements still unread)", async () => {
    const { worker, child } = fakeWorker();
    guardHandoffs(worker);
    const taken = new FakeHandle();
    child.send(NEWCONN, taken);
    child.emit("exit", 0, null); // channel still connected: its last words may hold the acknowledgement
    taken.close();
    child.connected = false;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(taken.closes).toBe(1);
  });
});

describe("relayOutput", () => {
  it("passes on complete lines only, holding a partial line until its newline arrives", async () => {
    const { steps, final } = await relay(["one\ntw", "o and", " more\nthr", "ee\n"]);
    expect(steps).toEqual(["one\n", "one\n", "one\ntwo and more\n", "one\ntwo and more\nthree\n"]);
    expect(final).toBe("one\ntwo and more\nthree\n");
  });

  it("keeps multi-byte characters split across chunks intact", async () => {
    const bytes = Buffer.from("héllo wörld ✓\n");
    const { final } = await relay([bytes.subarray(0, 2), bytes.subarray(2, 9), bytes.subarray(9)]);
    expect(final).toBe("héllo wörld ✓\n");
  });

  it("passes nothing on while held, then everything, in order, once released", async () => {
    const { stream, relayed, read, close } = relayToFile();
    stream.write("before\n");
    await turn();
    relayed.hold();
    stream.write("while held\n");
    await turn();
    await turn();
    expect(read()).toBe("before\n");
    relayed.release();
    stream.write("after\n");
    expect(await close()).toBe("before\nwhile held\nafter\n");
  });

  it("holds what it read in the same turn as the hold, before it: a worker's lines read ahead of its IPC word", async () => {
    const { stream, relayed, read, close } = relayToFile();
    // The poll phase read the worker's pipe first, then its IPC message, which holds the relay.
    stream.write("draining\n");
    relayed.hold();
    await turn();
    await turn();
    expect(read()).toBe("");
    relayed.release();
    expect(await close()).toBe("draining\n");
  });

  it("ends a last line without a newline when the stream closes, and cuts a line past 1 MiB", async () => {
    expect((await relay(["done\nno newline"])).final).toBe("done\nno newline\n");
    const { steps } = await relay(["x".repeat(700_000), "y".repeat(700_000)]);
    expect(steps[0]).toBe("");
    expect(steps[1]).toBe("x".repeat(700_000) + "y".repeat(700_000) + "\n");
  });
});
