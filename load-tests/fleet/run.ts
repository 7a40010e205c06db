// The fleet scenario: 3 pods × 2 workers on this machine behind HAProxy configured like a Kubernetes
// Service (readiness checks on /health, no retries, no redispatch), PostgreSQL and Redis shared, a real
// Prometheus scraping each pod's metrics port, bounded load through HAProxy. It runs the rate-limit check
// (100 per window across 6 workers, Redis and PostgreSQL), `rounds` rolling-deploy steps (start a pod,
// wait until HAProxy has it in rotation, SIGTERM an old one), a pod SIGKILLed whole mid-job, then checks
// the jobs file and Prometheus, and prints one VERDICT line. `make fleet` runs 3 rounds; the CI test 1.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { delay, freePort, spawnChild, type Child } from "../../test/helpers/child.js";
import { startPostgres } from "../../test/helpers/postgres.js";
import { startRedis } from "../../test/helpers/redis.js";

/** The manifests' settings (docker/k8s/deployment.yaml): what the scenario proves. */
export const FLEET_SETTINGS = {
  shutdownDelayMs: 5000,
  shutdownTimeoutMs: 15_000,
  readinessPeriodSeconds: 2,
  readinessFailureThreshold: 2,
  readinessTimeoutSeconds: 2,
} as const;

export interface FleetOptions {
  root: string;
  /** Rolling-deploy steps (each: one new pod ready, one old pod SIGTERMed). */
  rounds: number;
  /** Load rate through HAProxy, requests per second. */
  rate: number;
  log?: (line: string) => void;
}

export interface FleetResult {
  pass: boolean;
  line: string;
  numbers: Record<string, number | string>;
}

const POD_SLOTS = 7;
const WORKERS = 2;
const LOAD_CONNECTIONS = 8;
const SCRAPE_SECONDS = 1;

interface Pod {
  name: string;
  slot: number;
  port: number;
  metricsPort: number;
  child: Child;
}

function need(path: string, pkg: string): void {
  if (spawnSync("sh", ["-c", `[ -x ${path} ]`]).status !== 0) throw new Error(`the fleet scenario needs ${pkg} (${path}): apt-get install -y ${pkg}`);
}

/** One command to HAProxy's runtime API, its answer. */
function haproxyCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const client = net.connect(socket);
    let answer = "";
    client.setEncoding("utf8");
    client.on("data", (chunk: string) => (answer += chunk));
    client.on("end", () => resolve(answer));
    client.on("error", reject);
    client.end(`${command}\n`);
  });
}

/** Per server of the `pods` backend: its status (UP, DOWN, MAINT …). */
async function serverStates(socket: string): Promise<Map<string, { status: string }>> {
  const [header, ...rows] = (await haproxyCommand(socket, "show stat")).trim().split("\n");
  const columns = (header ?? "").replace(/^# /, "").split(",");
  const at = (name: string) => columns.indexOf(name);
  const states = new Map<string, { status: string }>();
  for (const row of rows) {
    const cells = row.split(",");
    if (cells[at("pxname")] === "pods" && cells[at("svname")]?.startsWith("pod")) {
      states.set(cells[at("svname")]!, { status: cells[at("status")] ?? "" });
    }
  }
  return states;
}

async function until(what: string, test: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await test())) {
    if (Date.now() > deadline) throw new Error(`fleet: timed out waiting for ${what}`);
    await delay(100);
  }
}

/** A GET through HAProxy on a keep-alive agent: the status, or 0 and the error's code. */
function get(port: number, path: string, agent: Agent): Promise<{ status: number; error?: string }> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path, agent, timeout: 20_000 }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0 }));
      res.on("error", (error: NodeJS.ErrnoException) => resolve({ status: 0, error: error.code ?? error.message }));
    });
    req.on("timeout", () => req.destroy(Object.assign(new Error("timeout"), { code: "TIMEOUT" })));
    req.on("error", (error: NodeJS.ErrnoException) => resolve({ status: 0, error: error.code ?? error.message }));
    req.end();
  });
}

/** Bounded load: `rate` GET /hello per second over a few keep-alive connections, every outcome counted. */
class Load {
  ok = 0;
  /** Each failed request: when it was sent and when it failed (Date.now()), and how. */
  readonly failures: Array<{ sent: number; at: number; what: string }> = [];
  inFlight = 0;
  #stopped = false;
  readonly #loops: Promise<void>[] = [];
  readonly #agent = new Agent({ keepAlive: true, maxSockets: LOAD_CONNECTIONS });

  constructor(port: number, rate: number) {
    const interval = (1000 * LOAD_CONNECTIONS) / rate;
    for (let i = 0; i < LOAD_CONNECTIONS; i++) {
      this.#loops.push((async () => {
        await delay((interval * i) / LOAD_CONNECTIONS);
        let next = performance.now();
        while (!this.#stopped) {
          this.inFlight++;
          const sent = Date.now();
          const answer = await get(port, "/hello", this.#agent);
          this.inFlight--;
          if (answer.status === 200) this.ok++;
          else this.failures.push({ sent, at: Date.now(), what: answer.error ?? `HTTP ${answer.status}` });
          next += interval;
          await delay(Math.max(0, next - performance.now()));
        }
      })());
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#loops);
    this.#agent.destroy();
  }
}

/** Runs the scenario; every process it started is stopped before it returns. */
export async function runFleet(options: FleetOptions): Promise<FleetResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  need("/usr/sbin/haproxy", "haproxy");
  need("/usr/bin/prometheus", "prometheus");
  const dir = mkdtempSync(join(tmpdir(), "keelson-fleet-"));
  const pg = await startPostgres();
  const redis = await startRedis();
  const children: Child[] = [];
  const pods: Pod[] = [];
  let load: Load | undefined;
  try {
    const databaseUrl = await pg.createDatabase();
    const jobsFile = join(dir, "jobs.log");
    writeFileSync(jobsFile, "");
    const slots = await Promise.all(Array.from({ length: POD_SLOTS }, async () => ({ port: await freePort(), metricsPort: await freePort() })));
    const [lbPort, promPort] = [await freePort(), await freePort()];
    const socket = join(dir, "haproxy.sock");
    const { readinessPeriodSeconds: period, readinessFailureThreshold: fall, readinessTimeoutSeconds: checkTimeout } = FLEET_SETTINGS;
    writeFileSync(join(dir, "haproxy.cfg"), [
      "global",
      `  stats socket ${socket} mode 600 level admin`,
      "  maxconn 2000",
      "defaults",
      "  mode http",
      "  timeout connect 2s",
      "  timeout client 30s",
      "  timeout server 30s",
      `  timeout check ${checkTimeout}s`,
      // A failed request is counted, never retried elsewhere.
      "  retries 0",
      "  no option redispatch",
      // One request per server connection: the balancing (and a pod's removal) applies to every request.
      "  option http-server-close",
      "frontend service",
      `  bind 127.0.0.1:${lbPort}`,
      "  default_backend pods",
      "backend pods",
      "  balance roundrobin",
      // The readiness probe: GET /health every period, out after `fall` failures, back after one success;
      // a connection refused takes the server out at once (the kubelet sees a dead container at once).
      "  option httpchk GET /health",
      "  http-check expect status 200",
      `  default-server inter ${period}s fall ${fall} rise 1 observe layer4 error-limit 1 on-error mark-down`,
      ...slots.map((slot, i) => `  server pod${i + 1} 127.0.0.1:${slot.port} check`),
      "",
    ].join("\n"));
    const haproxy = spawnChild(["/usr/sbin/haproxy", "-db", "-f", join(dir, "haproxy.cfg")], { cwd: dir });
    children.push(haproxy);
    await until("HAProxy's socket", async () => haproxyCommand(socket, "show info").then(() => true, () => false), 20_000);

    writeFileSync(join(dir, "prometheus.yml"), [
      "global:",
      `  scrape_interval: ${SCRAPE_SECONDS}s`,
      "  scrape_timeout: 900ms",
      "scrape_configs:",
      "  - job_name: fleet",
      "    static_configs:",
      `      - targets: [${slots.map((slot) => `"127.0.0.1:${slot.metricsPort}"`).join(", ")}]`,
      "",
    ].join("\n"));
    const prometheus = spawnChild(["/usr/bin/prometheus", `--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "tsdb")}`,
      `--web.listen-address=127.0.0.1:${promPort}`], { cwd: dir });
    children.push(prometheus);
    await prometheus.waitFor(/Server is ready to receive web requests/, { timeoutMs: 60_000 });

    const run = `r${Date.now()}`;
    const startPod = async (slot: number): Promise<Pod> => {
      const { port, metricsPort } = slots[slot]!;
      const name = `pod${slot + 1}`;
      const child = spawnChild([process.execPath, "--import", "tsx", "cli/cli.ts", "start", "load-tests/fleet/app.ts",
        "--port", String(port), "--workers", String(WORKERS), "--metrics-port", String(metricsPort), "--ready-timeout", "120000"], {
        cwd: options.root, group: true,
        env: {
          NODE_ENV: "production", FLEET_POD: name, FLEET_RUN: run, FLEET_JOBS_FILE: jobsFile, FLEET_DATABASE_URL: databaseUrl, FLEET_REDIS_URL: redis.url,
          KEELSON_SHUTDOWN_DELAY_MS: String(FLEET_SETTINGS.shutdownDelayMs), KEELSON_SHUTDOWN_TIMEOUT_MS: String(FLEET_SETTINGS.shutdownTimeoutMs),
        },
        keep: (line) => !/ GET \/(hello|health|redis|pg)/.test(line),
      });
      children.push(child);
      const pod = { name, slot, port, metricsPort, child };
      pods.push(pod);
      await child.waitFor(/worker\(s\) ready in/, { timeoutMs: 120_000 });
      await until(`${name} in rotation`, async () => (await serverStates(socket)).get(name)?.status === "UP", 30_000);
      log(`fleet: ${name} ready and in rotation`);
      return pod;
    };
    await Promise.all([0, 1, 2].map((slot) => startPod(slot)));

    // Rate limits: 100 per window for the whole fleet, 300 asked, spread over the 6 workers.
    const allowed: Record<string, number> = {};
    for (const store of ["redis", "pg"]) {
      const agent = new Agent({ keepAlive: true, maxSockets: 6 });
      const answers: number[] = [];
      await Promise.all(Array.from({ length: 6 }, async () => {
        while (answers.length < 300) {
          answers.push(0);
          answers[answers.length - 1] = (await get(lbPort, `/${store}/limited`, agent)).status;
        }
      }));
      agent.destroy();
      allowed[store] = answers.filter((status) => status === 200).length;
      log(`fleet: rate limit in ${store}: ${allowed[store]} of ${answers.length} allowed, ${answers.filter((s) => s === 429).length} refused`);
    }

    load = new Load(lbPort, options.rate);
    await delay(3000);
    let failedBeforeKill = 0;
    let nextSlot = 3;
    for (let round = 0; round < options.rounds; round++) {
      const fresh = await startPod(nextSlot++);
      const old = pods.find((pod) => pod.child.alive() && pod !== fresh && pod.slot < fresh.slot)!;
      const signalled = Date.now();
      old.child.kill("SIGTERM");
      const exit = await old.child.exited;
      log(`fleet: ${old.name} SIGTERMed: exit ${exit.code ?? exit.signal} after ${Date.now() - signalled} ms; failed so far ${load.failures.length}`);
    }
    failedBeforeKill = load.failures.length;

    // A pod killed whole (primary and workers) in the middle of a job run.
    const victim = pods.filter((pod) => pod.child.alive()).at(-1)!;
    const survivors = pods.filter((pod) => pod.child.alive() && pod !== victim);
    if (survivors.length === 0) survivors.push(await startPod(nextSlot++));
    const mark = victim.child.output().length;
    const started = await victim.child.waitFor(/FLEETJOB started \S+/, { from: mark, timeoutMs: 60_000 });
    const killedTick = /FLEETJOB started (\S+)/.exec(started)?.[1] ?? "";
    await delay(500);
    const inFlightAtKill = load.inFlight;
    const killedAt = Date.now();
    victim.child.kill("SIGKILL", { all: true });
    await victim.child.exited;
    log(`fleet: ${victim.name} SIGKILLed during tick ${killedTick} (${inFlightAtKill} requests in flight in all)`);
    // Its tick is re-run by a survivor once its lease runs out.
    const rerun = await Promise.any(survivors.map((pod) => pod.child.waitFor(new RegExp(`FLEETJOB started ${killedTick}`), { from: 0, timeoutMs: 60_000 })
      .then(() => Date.now())));
    await until("the killed tick to finish elsewhere", () => readFileSync(jobsFile, "utf8").includes(`${killedTick} `), 30_000);
    await delay(3000);
    await load.stop();
    const atKill = load.failures.slice(failedBeforeKill);
    const failedAtKill = atKill.length;
    // Sent before the kill: in flight on it. Sent after: routed to it before HAProxy took it out.
    const failedInFlight = atKill.filter((failure) => failure.sent < killedAt).length;
    const failedRouted = failedAtKill - failedInFlight;
    const loadOk = load.ok;

    // Prometheus: one more scrape of the survivors, then the sum of every pod's last count.
    await delay(2500 * SCRAPE_SECONDS);
    const query = async (promql: string) => {
      const answer = await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=${encodeURIComponent(promql)}`).then((r) => r.json()) as
        { data: { result: Array<{ value: [number, string] }> } };
      return Number(answer.data.result[0]?.value[1] ?? Number.NaN);
    };
    const series = 'http_request_duration_seconds_count{route="/hello"}';
    const promCount = await query(`sum(max_over_time(${series}[1h]))`);
    const resets = await query(`sum(resets(${series}[1h]))`);
    const promOk = await query(`sum(max_over_time(http_request_duration_seconds_count{route="/hello",status_code="200"}[1h]))`);
    const podsSeen = await query(`count(count by (instance) (max_over_time(${series}[1h])))`);

    for (const pod of pods.filter((p) => p.child.alive())) pod.child.kill("SIGTERM");
    await Promise.all(pods.map((pod) => pod.child.exited));

    // Jobs: every tick from the first to the last finished exactly once.
    const ticks = readFileSync(jobsFile, "utf8").split("\n").filter(Boolean).map((line) => Date.parse(line.split(" ")[0]!));
    const sorted = ticks.toSorted((a, b) => a - b);
    const span = sorted.length === 0 ? 0 : (sorted.at(-1)! - sorted[0]!) / 1000 + 1;
    const doubled = ticks.length - new Set(ticks).size;
    const missing = span - new Set(ticks).size;

    // The requests Prometheus could not see: those a pod served after its last scrape, for the pod killed.
    const scrapeWindow = Math.ceil(options.rate * SCRAPE_SECONDS);
    const countGap = loadOk - promOk;
    const numbers = {
      rounds: options.rounds,
      requests: loadOk + load.failures.length,
      failedDuringDeploy: failedBeforeKill,
      failedAtKill,
      failedInFlight,
      failedRouted,
      inFlightAtKill,
      reRunAfterKillMs: rerun - killedAt,
      ticks: sorted.length,
      missingTicks: missing,
      doubledTicks: doubled,
      allowedRedis: allowed.redis ?? 0,
      allowedPostgres: allowed.pg ?? 0,
      prometheusCount: promCount,
      prometheusOk: promOk,
      loadOk,
      countGap,
      scrapeWindow,
      resets,
      podsSeen,
    };
    const pass = failedBeforeKill === 0 && failedInFlight <= inFlightAtKill && failedRouted <= LOAD_CONNECTIONS && missing === 0 && doubled === 0 && sorted.length > 10 &&
      allowed.redis === 100 && allowed.pg === 100 && resets === 0 && countGap >= 0 && countGap <= scrapeWindow && rerun - killedAt < 30_000;
    const failures = [...new Set(load.failures.map((f) => f.what))].join(", ") || "none";
    const line = `VERDICT fleet: ${pass ? "PASS" : "FAIL"} — 3 pods × ${WORKERS} workers behind HAProxy, ${numbers.requests} requests at ${options.rate}/s: ` +
      `${options.rounds} rolling deploy step(s) with ${failedBeforeKill} failed; a pod SIGKILLed: ${failedAtKill} failed, ${failedInFlight} of them in flight (${inFlightAtKill} in flight in all) and ${failedRouted} sent to it before HAProxy took it out (${failures}); ` +
      `jobs: ${sorted.length} ticks, ${missing} missing, ${doubled} doubled, the killed pod's tick re-run after ${((rerun - killedAt) / 1000).toFixed(1)} s; ` +
      `rate limit 100: ${allowed.redis} allowed with Redis, ${allowed.pg} with PostgreSQL; ` +
      `Prometheus: ${promOk} OK requests counted over ${podsSeen} pods vs ${loadOk} answered (gap ${countGap}, scrape window ${scrapeWindow}), ${resets} resets`;
    console.log(line);
    return { pass, line, numbers };
  } finally {
    await load?.stop();
    for (const child of children.toReversed()) if (child.alive()) child.kill("SIGKILL", { all: true });
    await Promise.all(children.map((child) => child.exited));
    await redis.stop();
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
