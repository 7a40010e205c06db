// A cluster feature owns its options, its `keelson start` flags and its `keelson status` line: the
// supervisor and the CLI read them from the feature list and name none of them.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseStart, START_USAGE as USAGE } from "../cli/args.js";
import { metricsPortFeature } from "../src/metrics/port-settings.js";
import { FEATURE_SETTINGS } from "../supervisor/feature-settings.js";
import { resolveOptions } from "../supervisor/options.js";

const ENTRY = "test/fixtures/supervisor-app.ts";

describe("the features' settings (supervisor/feature-settings.ts)", () => {
  it("lists the metrics port", () => {
    expect(FEATURE_SETTINGS).toContain(metricsPortFeature);
  });

  it("give keelson start its flags, their help and their variables", () => {
    for (const feature of FEATURE_SETTINGS) {
      for (const flag of feature.flags) expect(USAGE).toContain(`      ${flag.usage}\n`);
      for (const name of feature.env) expect(USAGE).toMatch(new RegExp(`Environment: .*\\b${name}\\b`));
    }
    const cli = parseStart([ENTRY, "--metrics-port", "off", "--metrics-host", "127.0.0.1"], {});
    expect(cli.command === "start" && [cli.options.metricsPort, cli.options.metricsHost]).toEqual([false, "127.0.0.1"]);
  });

  it("resolve into the supervisor's options", () => {
    const options = resolveOptions({ entry: ENTRY, workers: 1, controlSocket: false, metricsPort: 9999, metricsHost: "::1" });
    expect(options).toMatchObject({ metricsPort: 9999, metricsPortIsDefault: false, metricsHost: "::1" });
  });

  it("write their line of keelson status from their section", () => {
    expect(metricsPortFeature.statusLine?.(undefined)).toBeUndefined();
    expect(metricsPortFeature.statusLine?.({ url: "http://[::]:9464/metrics", note: undefined })).toBe("metrics on http://[::]:9464/metrics");
    expect(metricsPortFeature.statusLine?.({ url: "http://[::]:4000/metrics", note: "taken" })).toBe("metrics on http://[::]:4000/metrics (taken)");
  });

  it("are named nowhere else in the supervisor's options or the CLI", () => {
    for (const file of ["supervisor/options.ts", "cli/args.ts", "cli/control-command.ts", "cli/main.ts"]) {
      const code = readFileSync(new URL(`../${file}`, import.meta.url), "utf8").replace(/^\s*(\/\/|\/?\*).*$/gm, "");
      expect(code, file).not.toMatch(/metrics-port|metrics-host|KEELSON_METRICS|metricsPort|metricsHost|MetricsPortState/);
    }
  });
});
