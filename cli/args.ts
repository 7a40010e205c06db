import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { MAX_TIMER_MS, MS_ABOVE_0, MS_FROM_0, PORT_RULE, checkHost, checkOneOf, parseNumber, readPortEnv, type NumberRule } from "../src/checks.js";
import { parseSize } from "../supervisor/size.js";
import { BALANCERS } from "../supervisor/balancer.js";
import { FEATURE_SETTINGS, featureOptionsFromCli } from "../supervisor/feature-settings.js";
import { readWorkersEnv, type SupervisorOptions } from "../supervisor/options.js";
import { errorMessage } from "../src/errors.js";

/** `keelson start …`, parsed: the supervisor's options, or what is wrong with the arguments. */
export type StartCommand =
  | { command: "start"; options: SupervisorOptions }
  | { command: "error"; message: string };

export const START_USAGE = `Usage: keelson start <entry> [options] [-- entry arguments]

Runs <entry> (a module that builds a keelson App and calls listen()) in N node:cluster
workers behind one port. SIGINT/SIGTERM: drain every worker and exit (0 when all exited
cleanly, else 1). SIGHUP: rolling reload, one worker at a time. It also stops, as on SIGTERM,
when the program that started it exits first (npm start, npx, a wrapper script), unless it runs
in a session of its own (setsid, a service manager) or under nohup (docs/deployment.md).

Options (times in milliseconds):
  -w, --workers N             workers (default: $WORKERS, else $WEB_CONCURRENCY, else one per CPU)
  -p, --port N                port of the App (default: $PORT, else the App's own default, 3000)
      --host ADDR             address of the App, 127.0.0.1 for this machine only (default: $HOST,
                              else the App's own host, else every interface)
      --ready-timeout MS      a worker must listen within this (default 30000)
      --shutdown-timeout MS   drain budget assumed before a worker reports its own (default 10000)
      --kill-margin MS        SIGKILL a draining worker this long after its budget (default 1000)
      --heartbeat-interval MS worker heartbeat period (default 1000)
      --watchdog-timeout MS   kill a worker silent this long, blocked event loop; 0 = off (default 10000)
      --backoff-initial MS    first restart delay after a crash, doubling (default 100)
      --backoff-max MS        largest restart delay (default 10000)
      --backoff-reset MS      uptime that resets a slot's delay (default 30000)
      --max-crashes N         crashes within --crash-window that stop the supervisor, exit 1 (default 10)
      --crash-window MS       (default 60000)
${FEATURE_SETTINGS.flatMap((feature) => feature.flags).map((flag) => `      ${flag.usage}\n`).join("")}      --max-memory SIZE       replace a worker whose RSS stays above SIZE (512M, 2G) for
                              --max-memory-window MS (default 30000), new worker first
      --balancer round-robin|reuseport
                              who spreads connections: the primary (default: $KEELSON_BALANCER, else
                              round-robin) or the kernel, each worker listening with SO_REUSEPORT
                              (Linux, Node 22.12+, net.ipv4.tcp_migrate_req=1)
      --control-socket PATH   Unix socket for keelson status/reload (default: $KEELSON_CONTROL_SOCKET,
                              else one per folder and port in $XDG_RUNTIME_DIR/keelson or /tmp/keelson-<uid>)
  -h, --help                  this text

A TypeScript entry (Node options reach the workers): NODE_OPTIONS="--import tsx" npx keelson start app.ts
Environment: WORKERS, PORT, HOST, KEELSON_BALANCER, ${FEATURE_SETTINGS.flatMap((feature) => feature.env).join(", ")}, KEELSON_CONTROL_SOCKET, NODE_ENV=production (JSON log lines).`;

const NUMBER_FLAGS = {
  workers: "w", port: "p", "ready-timeout": undefined, "shutdown-timeout": undefined, "kill-margin": undefined,
  "heartbeat-interval": undefined, "watchdog-timeout": undefined, "backoff-initial": undefined, "backoff-max": undefined,
  "backoff-reset": undefined, "max-crashes": undefined, "crash-window": undefined, "max-memory-window": undefined,
} as const;

type NumberFlag = keyof typeof NUMBER_FLAGS;

/** The cluster features' own flags (supervisor/feature-settings.ts), each taking a value. */
const featureFlags = Object.fromEntries(FEATURE_SETTINGS.flatMap((feature) => feature.flags).map((flag) => [flag.name, { type: "string" as const }]));

const COUNT: NumberRule = { integer: true, min: 1 };
/** Each flag's own rule (the option's in resolveOptions), so a bad value is named by the flag the user typed. */
const FLAG_RULES: Record<NumberFlag, NumberRule> = {
  workers: COUNT, port: PORT_RULE, "ready-timeout": MS_ABOVE_0, "shutdown-timeout": MS_FROM_0, "kill-margin": MS_FROM_0,
  "heartbeat-interval": { ...COUNT, max: MAX_TIMER_MS }, "watchdog-timeout": MS_FROM_0, "backoff-initial": MS_FROM_0, "backoff-max": MS_FROM_0,
  "backoff-reset": MS_FROM_0, "max-crashes": COUNT, "crash-window": MS_ABOVE_0, "max-memory-window": MS_FROM_0,
};

function readNumber(values: Partial<Record<NumberFlag, string>>, flag: NumberFlag): number | undefined {
  const raw = values[flag];
  return raw === undefined ? undefined : parseNumber(raw, `--${flag}`, FLAG_RULES[flag]);
}

/** `--host`, else `HOST`: the flag before the variable, as for the port. */
export function readHost(flag: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  if (flag !== undefined) return checkHost(flag.trim(), "--host");
  return checkHost(env.HOST?.trim() || undefined, "HOST");
}

/**
 * Parses the arguments after `keelson start`. Never throws: errors come back as `{ command: "error" }`.
 *
 * @example
 * parseStart(["dist/main.js", "--port", "8080", "--host", "127.0.0.1"]); // { command: "start", options: { entry: "dist/main.js", port: 8080, host: "127.0.0.1", … } }
 */
export function parseStart(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): StartCommand {
  try {
    const options = Object.fromEntries(Object.entries(NUMBER_FLAGS).map(([name, short]) => [
      name, short === undefined ? { type: "string" as const } : { type: "string" as const, short },
    ]));
    const { values, positionals } = parseArgs({
      args: [...argv], allowPositionals: true, strict: true,
      options: { ...options, ...featureFlags, host: { type: "string" }, "control-socket": { type: "string" }, "max-memory": { type: "string" }, balancer: { type: "string" } },
    });
    const separator = argv.indexOf("--");
    const own = separator === -1 ? positionals : positionals.slice(0, positionals.length - (argv.length - separator - 1));
    const entryArgs = separator === -1 ? [] : argv.slice(separator + 1);
    const [entry, ...extra] = own;
    if (entry === undefined) return { command: "error", message: "missing <entry>: the module that builds the App and calls listen()" };
    if (extra.length > 0) return { command: "error", message: `unexpected argument(s): ${extra.join(" ")} (put entry arguments after --)` };
    if (!entry.startsWith("file:") && !existsSync(resolve(entry))) return { command: "error", message: `entry not found: ${resolve(entry)}` };
    const numbers = values as Partial<Record<NumberFlag, string>>;
    const number = (flag: NumberFlag) => readNumber(numbers, flag);
    return {
      command: "start",
      options: {
        entry,
        args: entryArgs,
        workers: number("workers") ?? readWorkersEnv(env),
        port: number("port") ?? readPortEnv(env),
        host: readHost(values.host, env),
        readyTimeout: number("ready-timeout"),
        shutdownTimeout: number("shutdown-timeout"),
        killMargin: number("kill-margin"),
        heartbeatInterval: number("heartbeat-interval"),
        watchdogTimeout: number("watchdog-timeout"),
        backoff: { initial: number("backoff-initial"), max: number("backoff-max"), resetAfter: number("backoff-reset") },
        crashLoop: { maxCrashes: number("max-crashes"), window: number("crash-window") },
        ...featureOptionsFromCli(values as Record<string, string | undefined>, env),
        controlSocket: values["control-socket"],
        maxMemory: values["max-memory"] === undefined ? undefined : parseSize(values["max-memory"], "--max-memory"),
        maxMemoryWindow: number("max-memory-window"),
        ...(values.balancer === undefined ? {} : { balancer: checkOneOf(values.balancer, "--balancer", BALANCERS) }),
      },
    };
  } catch (error) {
    return { command: "error", message: errorMessage(error) };
  }
}
