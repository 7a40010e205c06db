import { afterAll, beforeAll, beforeEach, describe } from "vitest";
import type { App, KConfig } from "../../src/index.js";
import { captureLogs, type LogCapture } from "./logs.js";
import { listenOn, type Listening } from "./listen.js";

/** How a case reaches the app: `app.request()` in-process, or fetch over a real socket. */
export type Mode = "in-process" | "socket";

/** What a case of `describeBoth` gets: the same calls in both modes. */
export interface Target {
  readonly mode: Mode;
  readonly app: App;
  /** The app's log, cleared before each case. */
  readonly logs: LogCapture;
  /** Sends a request by path, through the mode's transport. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
}

export const MODES: readonly Mode[] = ["in-process", "socket"];

/**
 * Runs the same cases twice, like h3's own test matrix: once through `app.request()` and once
 * through `listen()` on port 0 and a real HTTP client. `build` receives the config both modes
 * need (port 0 and a captured text logger) and returns the app; one app per mode.
 */
export function describeBoth(title: string, build: (base: KConfig) => App, cases: (target: () => Target) => void): void {
  for (const mode of MODES) {
    describe(`${title} [${mode}]`, () => {
      let target: Target | undefined;
      let server: Listening | undefined;
      beforeAll(async () => {
        const logs = captureLogs();
        const app = build({ port: 0, logger: logs.logger });
        if (mode === "socket") server = await listenOn(app);
        const transport = server;
        target = {
          mode,
          app,
          logs,
          fetch: transport ? (path, init) => transport.fetch(path, init) : (path, init) => app.request(path, init),
        };
      });
      beforeEach(() => target?.logs.clear());
      afterAll(async () => {
        await server?.stop();
      });
      cases(() => {
        if (!target) throw new Error("describeBoth: the app is not built yet");
        return target;
      });
    });
  }
}
