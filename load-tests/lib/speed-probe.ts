// The machine's speed right before and right after each measured window (`--side-by-side`): a child
// pinned to the servers' CPU runs fixed work on request (speed-probe-child.ts). On this machine kind
// the speed of a core halves for tens of seconds at a time, whatever runs on it; a window measured
// across such a change, or two windows measured on either side of one, do not compare, and the
// report can leave their round out (stats.ts, `pairRatio`'s `steady`).
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { adopt as track } from "../../harness/child.js";

export class SpeedProbe {
  readonly #child: ChildProcess;
  readonly #waiting: Array<(line: string) => void> = [];
  #buffered = "";
  #exited = false;
  readonly ready: Promise<void>;

  constructor(pinCpu: number | null, cwd: string) {
    const child = fileURLToPath(new URL("./speed-probe-child.ts", import.meta.url));
    const nodeArgs = ["--import", "tsx", child];
    const [command, args] = pinCpu === null ? [process.execPath, nodeArgs] : ["taskset", ["-c", String(pinCpu), process.execPath, ...nodeArgs]];
    this.#child = spawn(command, args, { cwd, stdio: ["pipe", "pipe", "inherit"] });
    track(this.#child);
    this.#child.stdout?.setEncoding("utf8");
    this.#child.stdout?.on("data", (chunk: string) => {
      this.#buffered += chunk;
      for (let end; (end = this.#buffered.indexOf("\n")) !== -1; ) {
        const line = this.#buffered.slice(0, end);
        this.#buffered = this.#buffered.slice(end + 1);
        this.#waiting.shift()?.(line);
      }
    });
    // An exited probe answers every waiting and later call with nothing, which measure() refuses.
    this.#child.on("exit", () => {
      this.#exited = true;
      for (const answer of this.#waiting.splice(0)) answer("");
    });
    this.ready = new Promise((resolve) => this.#waiting.push(() => resolve()));
  }

  /** Fixed work units per CPU millisecond, now (about 100 ms). */
  async measure(): Promise<number> {
    await this.ready;
    const line = this.#exited ? "" : await new Promise<string>((resolve) => {
      this.#waiting.push(resolve);
      this.#child.stdin?.write("\n");
    });
    const speed = Number(line);
    if (!(speed > 0)) throw new Error(`the speed probe answered ${JSON.stringify(line)}`);
    return speed;
  }

  close(): void {
    this.#child.stdin?.end();
    this.#child.kill();
  }
}
