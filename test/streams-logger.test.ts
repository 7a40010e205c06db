// The streams hub logs through the App's logger (its store's reconnection lines), not one of its own.
import { describe, expect, it } from "vitest";
import { App } from "../src/app.js";
import { hub, StreamHub } from "../src/streams/hub.js";
import { captureLogs } from "./helpers/logs.js";

describe("the streams hub's logger", () => {
  it("is the first App's: a second App of the process does not replace it", () => {
    const first = captureLogs().logger;
    const apps = [new App({ logger: first, portEnv: false, port: 0 }), new App({ logger: captureLogs().logger, portEnv: false, port: 0 })];
    expect(apps.map((app) => app.logger)).not.toContain(undefined);
    expect(hub.logger).toBe(first);
  });

  it("is kept once given", () => {
    const own = new StreamHub();
    expect(own.logger).toBeUndefined();
    const logger = captureLogs().logger;
    own.useLogger(logger);
    own.useLogger(captureLogs().logger);
    expect(own.logger).toBe(logger);
  });
});
