// Request ids under the supervisor, as real processes: two workers never hand out the same id, and
// a request logger's error line leaves its worker running (the App logger's error() would exit).
import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { alive, get, killAll, readyWorkers, startSupervisor } from "./fixtures/supervisor-harness.js";

afterEach(() => killAll());

interface Answer {
  header: string | undefined;
  body: { pid: number; worker: string; requestId: string };
}

/** GET on a fresh connection (round-robin sees a new client each time), with the response's id header. */
function fetchId(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, headers, timeout: 20_000 }, (res) => {
      let data = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (data += chunk));
      res.on("end", () => resolve({ header: res.headers["x-request-id"] as string | undefined, body: JSON.parse(data) as Answer["body"] }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

describe("request ids under the supervisor", () => {
  it("2 workers: every generated id is unique, each worker's have a prefix of their own, a sent id is kept", async () => {
    const run = await startSupervisor(["--workers", "2"], { env: { NODE_ENV: "production" } });
    await run.waitFor(/worker\(s\) ready in/);
    const answers: Answer[] = [];
    for (let batch = 0; batch < 10; batch++) {
      answers.push(...await Promise.all(Array.from({ length: 20 }, () => fetchId(run.port, "/request-id"))));
    }
    const pids = new Set(answers.map((a) => a.body.pid));
    expect(pids.size).toBe(2);
    for (const answer of answers) expect(answer.header).toBe(answer.body.requestId);
    const ids = answers.map((a) => a.body.requestId);
    expect(new Set(ids).size).toBe(ids.length);
    const prefixes = new Map<number, Set<string>>();
    for (const { body } of answers) {
      const prefix = body.requestId.split("-")[0]!;
      prefixes.set(body.pid, (prefixes.get(body.pid) ?? new Set()).add(prefix));
    }
    // One prefix per process, not shared: the counters of two workers can never meet.
    expect([...prefixes.values()].map((set) => set.size)).toEqual([1, 1]);
    const [a, b] = [...prefixes.values()].map((set) => [...set][0]);
    expect(a).not.toBe(b);

    const sent = await fetchId(run.port, "/request-id", { "x-request-id": "edge-proxy:7f3a.1" });
    expect([sent.header, sent.body.requestId]).toEqual(["edge-proxy:7f3a.1", "edge-proxy:7f3a.1"]);

    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
    // The request lines carry the same ids, as `request_id` (JSON in production).
    const logged = new Set(run.output().split("\n").filter((line) => line.includes('"path":"/request-id"'))
      .map((line) => (JSON.parse(line) as { request_id: string }).request_id));
    for (const id of [...ids, "edge-proxy:7f3a.1"]) expect(logged.has(id)).toBe(true);
  });

  it("ctx.logger.error() writes its line and the worker goes on serving", async () => {
    const run = await startSupervisor(["--workers", "1"]);
    await run.waitFor(/worker\(s\) ready in/);
    const [worker] = readyWorkers(run);
    const first = await get(run.port, "/log-error");
    expect(first.status).toBe(200);
    const line = await run.waitFor(/payment failed: card declined/);
    expect(line).toMatch(/^\[ERROR\] \S+ \S+ \[w1 \d+\] payment failed: card declined request_id=[0-9a-f]{10}-\d+ order=7$/);
    const second = await get(run.port, "/log-error");
    expect([second.status, second.body.pid, alive(worker!.pid)]).toEqual([200, worker!.pid, true]);
    expect(run.lines(/exited|restarting/)).toEqual([]);
    process.kill(run.pid, "SIGTERM");
    expect(await run.exited).toEqual({ code: 0, signal: null });
  });
});
