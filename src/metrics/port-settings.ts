import { PORT_RULE, checkHost, checkNumber, numberFromText } from "../checks.js";
import type { FeatureSettings } from "../cluster/feature-host.js";

/** The OpenTelemetry Prometheus exporter's port: where a Prometheus setup looks by habit. */
export const DEFAULT_METRICS_PORT = 9464;

/** The supervisor's options of the metrics port (SupervisorOptions has them). */
export interface MetricsPortOptions {
  /**
   * Port where the primary serves the cluster-wide `/metrics` (when the App uses
   * `createPrometheus`); 0 picks a free one, `false` turns it off. Default: `KEELSON_METRICS_PORT`
   * (a number or `off`), else 9464.
   */
  metricsPort?: number | false;
  /** Address of the metrics port. Default: `KEELSON_METRICS_HOST`, else `host` (or `HOST`), else every interface. */
  metricsHost?: string;
}

/** Where the port listens: the supervisor's `metricsPort` (false: no port) and `metricsHost` options. */
export interface MetricsPortSettings {
  readonly metricsPort: number | false;
  /** True when `metricsPort` is the default (nobody chose it): taken, a free port is used instead. */
  readonly metricsPortIsDefault?: boolean;
  readonly metricsHost: string | undefined;
}

/** Where the cluster-wide metrics are served (for `keelson status`); `note` says why not on the port asked. */
export interface MetricsPortState {
  url: string | undefined;
  note: string | undefined;
}

/** Reads a metrics port: an integer from 0 to 65535, or `off`; `what` names it in the error. */
export function parseMetricsPort(raw: string, what: string): number | false {
  const text = raw.trim().toLowerCase();
  if (text === "off" || text === "false") return false;
  const value = numberFromText(text, PORT_RULE);
  if (value === undefined) throw new Error(`${what} must be a port from 0 to 65535, or off, got "${raw}"`);
  return value;
}

const blank = (value: string | undefined): value is undefined => value === undefined || value.trim() === "";

/**
 * The metrics port's part of the supervisor's options, of `keelson start` (its flags, its
 * variables) and of `keelson status` (its line): the supervisor and the CLI read it from the
 * feature list (supervisor/feature-settings.ts) and name none of it themselves.
 *
 * @example
 * const { metricsPort } = metricsPortFeature.resolve({ metricsPort: 0 }, process.env, { host: undefined }); // 0: a free port
 */
export const metricsPortFeature: FeatureSettings<MetricsPortOptions, Required<MetricsPortSettings>> = {
  name: "metrics",
  flags: [
    { name: "metrics-port", usage: "--metrics-port N|off    port of the cluster-wide /metrics, served by the primary when the\n                              App uses createPrometheus (default: $KEELSON_METRICS_PORT, else 9464)" },
    { name: "metrics-host", usage: "--metrics-host ADDR     its address (default: $KEELSON_METRICS_HOST, else --host, else every interface)" },
  ],
  env: ["KEELSON_METRICS_PORT", "KEELSON_METRICS_HOST"],
  fromCli(values, env) {
    const flag = values["metrics-port"];
    const fromEnv = env.KEELSON_METRICS_PORT;
    return {
      metricsPort: flag !== undefined ? parseMetricsPort(flag, "--metrics-port") : blank(fromEnv) ? undefined : parseMetricsPort(fromEnv, "KEELSON_METRICS_PORT"),
      metricsHost: checkHost(values["metrics-host"]?.trim(), "--metrics-host") ?? checkHost(env.KEELSON_METRICS_HOST?.trim() || undefined, "KEELSON_METRICS_HOST"),
    };
  },
  resolve(options, env, service) {
    const fromEnv = env.KEELSON_METRICS_PORT;
    const { metricsPort } = options;
    return {
      metricsPort: metricsPort === false ? false : metricsPort !== undefined ? checkNumber(metricsPort, "metricsPort", PORT_RULE)
        : blank(fromEnv) ? DEFAULT_METRICS_PORT : parseMetricsPort(fromEnv, "KEELSON_METRICS_PORT"),
      metricsPortIsDefault: metricsPort === undefined && blank(fromEnv),
      // The service's address by default: `--host 127.0.0.1` must not leave the metrics on every interface.
      metricsHost: checkHost(options.metricsHost, "metricsHost")
        ?? checkHost(env.KEELSON_METRICS_HOST?.trim() || undefined, "KEELSON_METRICS_HOST") ?? service.host,
    };
  },
  statusLine(section) {
    const state = section as MetricsPortState | undefined;
    return state?.url === undefined ? undefined : `metrics on ${state.url}${state.note === undefined ? "" : ` (${state.note})`}`;
  },
};
