import type { App, ShutdownReport } from "../../src/index.js";
import { delay } from "../../harness/child.js";

/** A running App on a real socket. */
export interface Listening {
  readonly port: number;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** `fetch` against the server, by path. */
  fetch(path: string, init?: RequestInit): Promise<Response>;
  /** `app.close()`, then waits for `listen()` to settle. */
  stop(): Promise<ShutdownReport>;
}


/**
 * Calls `app.listen()` (configure the app with port 0) and waits until the port is bound.
 * `listen()` itself resolves only after shutdown, so readiness is read from `app.port`.
 */
export async function listenOn(app: App, timeoutMs = 10_000): Promise<Listening> {
  let outcome: { error: unknown } | "resolved" | undefined;
  const listening = app.listen().then(
    () => void (outcome = "resolved"),
    (error: unknown) => void (outcome = { error }),
  );
  const deadline = Date.now() + timeoutMs;
  let port = app.port;
  while (port === undefined) {
    if (typeof outcome === "object") throw outcome.error;
    if (outcome === "resolved") throw new Error("listen() resolved before the server was up");
    if (Date.now() > deadline) throw new Error(`server not listening after ${timeoutMs}ms`);
    await delay(5);
    port = app.port;
  }
  const url = `http://127.0.0.1:${port}`;
  return {
    port,
    url,
    fetch: (path, init) => fetch(url + path, init),
    async stop() {
      const report = await app.close();
      await listening;
      return report;
    },
  };
}
