// Options are resolved in one place and once: the App's pieces by resolveConfig, a supervisor's
// options by resolveOptions (which `keelson start` runs once and hands over), the port by one rule.
import { describe, expect, it } from "vitest";
import { parseStart } from "../cli/args.js";
import { parseDevCommand } from "../cli/dev.js";
import { App } from "../src/app.js";
import { DEFAULT_PORT, readPortEnv } from "../src/checks.js";
import { resolveConfig } from "../src/config.js";
import { Logger } from "../src/logging/logger.js";
import { effectivePort } from "../supervisor/control-path.js";
import { askedPort, isResolved, resolveOptions } from "../supervisor/options.js";
import { Supervisor } from "../supervisor/primary.js";
import { captureLogs } from "./helpers/logs.js";

const quiet = () => ({ entry: "app.js", workers: 1, controlSocket: false as const, metricsPort: false as const, logger: captureLogs().logger });

describe("resolveConfig: everything the App is built with", () => {
  it("returns the settings, the logger, the CORS policy and the load-shedding options", () => {
    const logger = new Logger({ isProduction: false });
    const settings = resolveConfig({ logger, port: 8080, portEnv: false, loadShedding: true, cors: { origin: "https://a.example" } });
    expect(settings.config.port).toBe(8080);
    expect(settings.logger).toBe(logger);
    expect(settings.cors).toMatchObject({ apply: expect.any(Function), preflight: expect.any(Function) });
    expect(settings.loadShedding).toEqual({});
    const off = resolveConfig({ portEnv: false, logLevel: "warn", cors: false, loadShedding: false });
    expect(off.cors).toBeUndefined();
    expect(off.loadShedding).toBeUndefined();
    expect(off.logger.level).toBe("warn");
  });

  it("is what the App holds", () => {
    const logger = new Logger({ isProduction: false });
    const app = new App({ logger, portEnv: false, serviceName: "svc" });
    expect(app.logger).toBe(logger);
    expect(app.config).toEqual(resolveConfig({ logger, portEnv: false, serviceName: "svc" }).config);
  });
});

describe("resolveOptions: once per supervisor", () => {
  it("marks what it made, and a Supervisor given that uses it as it is", () => {
    const resolved = resolveOptions(quiet());
    expect(isResolved(resolved)).toBe(true);
    expect(isResolved({ ...resolved })).toBe(false);
    expect(new Supervisor(resolved, { features: [] }).options).toBe(resolved);
  });

  it("is still applied to options as written", () => {
    const written = quiet();
    const supervisor = new Supervisor(written, { features: [] });
    expect(supervisor.options).not.toBe(written);
    expect(isResolved(supervisor.options)).toBe(true);
    expect(supervisor.options.readyTimeout).toBe(30_000);
  });
});

const env = (PORT: string) => ({ PORT });

describe("the port: one rule, one reader of PORT, one default", () => {
  it("reads PORT the same way for the App, the supervisor and the CLI", () => {
    expect(readPortEnv(env("4321"))).toBe(4321);
    expect(readPortEnv(env(" "))).toBeUndefined();
    expect(effectivePort(undefined, env("4321"))).toBe(4321);
    expect(askedPort({ port: undefined, env: {} }, env("4321"))).toBe(4321);
    const cli = parseStart(["test/fixtures/supervisor-app.ts"], env("4321"));
    expect(cli.command === "start" && cli.options.port).toBe(4321);
    expect(parseDevCommand(["app.ts"], env("4321")).port).toBe(4321);
  });

  it("refuses the same values everywhere, with the variable's name", () => {
    for (const bad of ["0x10", "70000", "1.5", "http"]) {
      const message = `PORT must be an integer from 0 to 65535, got "${bad}"`;
      expect(() => readPortEnv(env(bad))).toThrow(message);
      expect(() => effectivePort(undefined, env(bad))).toThrow(message);
      expect(() => askedPort({ port: undefined, env: env(bad) })).toThrow(message);
      expect(parseStart(["test/fixtures/supervisor-app.ts"], env(bad))).toEqual({ command: "error", message });
      expect(() => parseDevCommand(["app.ts"], env(bad))).toThrow(message);
    }
  });

  it("defaults to 3000 for the App and the supervisor's control socket alike", () => {
    expect(DEFAULT_PORT).toBe(3000);
    expect(effectivePort(undefined, {})).toBe(DEFAULT_PORT);
    expect(resolveConfig({ portEnv: false }).config.port).toBe(DEFAULT_PORT);
  });
});
