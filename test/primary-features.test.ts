// The primary's extension point in-process: cluster features install from one list
// (supervisor/features.ts) through FeatureHost (src/cluster/feature-host.ts), and src/ never
// reaches up into supervisor/.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { FeatureHost, FeatureWorker } from "../src/cluster/feature-host.js";
import { defineIpcMessage, defineIpcRequest, type IpcMessageType, type IpcRequestType } from "../src/cluster/ipc.js";
import { FEATURES } from "../supervisor/features.js";
import { resolveOptions } from "../supervisor/options.js";
import { fakeSupervisor, settle, stopFakeSupervisors } from "./helpers/fake-cluster.js";
import { captureLogs } from "./helpers/logs.js";

afterEach(stopFakeSupervisors);

const ROOT = join(import.meta.dirname, "..");

/** Every .ts file under `folder`, relative to the repository. */
function sources(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(folder, file));
}

/** The relative imports of a file (type-only and re-exports included), as repository paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), "utf8");
  const found = [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?\bfrom\s*"(\.[^"]+)"|import\(\s*"(\.[^"]+)"\s*\)/g)];
  return found.map((match) => relative(ROOT, resolve(ROOT, dirname(file), (match[1] ?? match[2] ?? "").replace(/\.js$/, ".ts"))));
}

describe("cluster features on the primary", () => {
  it("FEATURES installs jobs, cluster metrics with their port, rate limits, streams and idempotency keys through the host alone", () => {
    const handled: string[] = [];
    const heard: string[] = [];
    let workerListeners = 0;
    let stopListeners = 0;
    const host: FeatureHost = {
      logger: captureLogs().logger, stopping: false, finished: new Promise(() => {}),
      handle: (type: IpcRequestType<unknown, unknown>) => handled.push(type.name),
      onMessage: (type: IpcMessageType<unknown>) => heard.push(type.name),
      onWorker: () => (workerListeners++, () => {}),
      onStop: () => void stopListeners++,
      fail: () => {},
      addStatus: () => {},
    };
    const options = resolveOptions({ entry: "app.ts", workers: 1, metricsPort: 0, controlSocket: false });
    for (const install of FEATURES) install(host, options);
    expect(handled).toEqual(["metrics:cluster", "metrics:final", "ratelimit:take", "streams:publish", "streams:replay", "streams:piece", "idempotency:begin", "idempotency:complete", "idempotency:release"]);
    expect(heard).toEqual(["metrics:hello", "streams:interest"]);
    expect([workerListeners, stopListeners]).toEqual([4, 1]);
  });

  it("a feature in the list sees every worker, serves its requests, hears its messages, and is told when stopping begins", async () => {
    const ping = defineIpcRequest<{ n: number }, { n: number }>("probe:ping");
    const note = defineIpcMessage<{ text: string }>("probe:note");
    const events: string[] = [];
    const probe = (host: FeatureHost) => {
      host.onWorker((worker: FeatureWorker) => {
        events.push(`worker ${worker.id} ${worker.state}`);
        void worker.ready.then(() => events.push(`${worker.name} ready`), () => {});
        void worker.exited.then((exit) => events.push(`worker ${worker.id} exited ${exit.code}`));
      });
      host.handle(ping, ({ n }) => ({ n: n + 1 }));
      host.onMessage(note, ({ text }, worker) => events.push(`note from ${worker.id}: ${text}`));
      host.onStop(() => events.push("stop begins"));
    };
    const sup = fakeSupervisor({ workers: 2 }, { features: [probe] });
    await sup.start();
    const [one, two] = sup.cluster.forks;
    expect(await two?.app.request(ping, { n: 41 }, 1000)).toEqual({ n: 42 });
    one?.app.send(note, { text: "hi" });
    await settle();
    for (const worker of sup.cluster.forks) worker.onSignal = () => {};
    const stopped = sup.supervisor.stop();
    expect(events.at(-1)).toBe("stop begins");
    expect(one?.signals).toEqual(["SIGTERM"]);
    for (const worker of sup.cluster.forks) worker.exit(0);
    await stopped;
    expect(events).toEqual([
      "worker 1 starting", "worker 2 starting",
      `worker 1 (pid ${one?.pid}) ready`, `worker 2 (pid ${two?.pid}) ready`,
      "note from 1: hi", "stop begins", "worker 1 exited 0", "worker 2 exited 0",
    ]);
  });

  it("a feature's fail() stops the supervisor with exit 1 and its reason", async () => {
    let fail: ((reason: string) => unknown) | undefined;
    const sup = fakeSupervisor({ workers: 1 }, { features: [(host) => (fail = host.fail)] });
    await sup.start();
    void fail?.("cannot serve metrics on :9464: already in use");
    expect(await sup.stop()).toMatchObject({ exitCode: 1, reason: "cannot serve metrics on :9464: already in use" });
  });

  it("nothing in src/ imports supervisor/ or cli/, and supervisor/ has no import cycle (type-only included)", () => {
    const upward = sources("src").flatMap((file) => importsOf(file).filter((to) => /^(supervisor|cli)\//.test(to)).map((to) => `${file} → ${to}`));
    expect(upward).toEqual([]);
    const files = sources("supervisor");
    const graph = new Map(files.map((file) => [file, importsOf(file).filter((to) => to.startsWith("supervisor/"))]));
    const cycles: string[] = [];
    const visit = (file: string, path: string[]) => {
      if (path.includes(file)) {
        cycles.push([...path.slice(path.indexOf(file)), file].join(" → "));
        return;
      }
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
    // The scan sees the imports it must: the primary reaches the feature list, the list a feature.
    expect(graph.get("supervisor/primary.ts")).toContain("supervisor/features.ts");
    expect(importsOf("supervisor/features.ts")).toContain("src/jobs/primary.ts");
  });
});
