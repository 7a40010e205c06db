// Harness side of the load-generator child: spawn it pinned, send jobs, await replies.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { adopt as track } from "../../harness/child.js";
import type { LoadJob, LoaderReply, LoadResult } from "./types.js";

interface Pending {
  resolve: (result: LoadResult) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

export class LoadClient {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(pinCpu: number | null, cwd: string) {
    const loader = fileURLToPath(new URL("./loader.ts", import.meta.url));
    const nodeArgs = ["--import", "tsx", loader];
    const [command, args] =
      pinCpu === null ? [process.execPath, nodeArgs] : ["taskset", ["-c", String(pinCpu), process.execPath, ...nodeArgs]];
    this.child = spawn(command, args, { cwd, stdio: ["ignore", "inherit", "inherit", "ipc"] });
    track(this.child);
    this.child.on("message", (message: LoaderReply) => this.settle(message));
    this.child.on("exit", (code, signal) => {
      const error = new Error(`load generator exited (code ${code}, signal ${signal})`);
      for (const [id, pending] of this.pending) {
        clearTimeout(pending.timer);
        pending.reject(error);
        this.pending.delete(id);
      }
    });
  }

  /** Runs one job; aborting `signal` ends the load early (the result covers the time it ran). */
  run(job: LoadJob, signal?: AbortSignal): Promise<LoadResult> {
    const id = this.nextId++;
    // Bounded: the run itself, the CPU probes, plus generous slack for a slow start.
    const timeoutMs = (job.durationSec + 30) * 1_000;
    const stop = (): void => {
      if (this.child.connected) this.child.send({ id, stop: true });
    };
    return new Promise<LoadResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`load run timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.child.send({ id, job }, (error) => {
        if (error) this.settle({ id, ok: false, error: error.message });
      });
      signal?.addEventListener("abort", stop, { once: true });
    }).finally(() => signal?.removeEventListener("abort", stop));
  }

  close(): void {
    if (this.child.connected) this.child.disconnect();
    this.child.kill("SIGTERM");
  }

  private settle(message: LoaderReply): void {
    const pending = this.pending.get(message.id);
    if (!pending) return;
    this.pending.delete(message.id);
    clearTimeout(pending.timer);
    if (message.ok) pending.resolve(message.result);
    else pending.reject(new Error(message.error));
  }
}
