#!/usr/bin/env node
// Fills Node's compile cache (NODE_COMPILE_CACHE) with V8's code for every module a service loads, by
// starting it once: `node scripts/warm-compile-cache.mjs dist/cli/cli.js start dist/examples/bookstore/main.js`
// runs that command with one worker, waits for the supervisor's "worker(s) ready" line, stops it with
// SIGTERM and exits 0 once every process has exited (each one writes its cache entries as it exits).
//
// docker/Dockerfile runs it in a stage of its own, as the image's user, and so does the Dockerfile `keelson new`
// writes (the script ships in the package: node_modules/keelson/scripts/): a container's file system starts
// empty, so without a cache shipped in the image every pod's first start compiles every module again.
// The cache is keyed by file path and content, Node version and user id: the stage uses the runtime's
// paths, Node and uid. Modules loaded only under some configuration (the PostgreSQL driver, the
// OpenTelemetry SDK) are compiled on their first use, as without the cache.
import { spawn } from "node:child_process";
import { readdirSync } from "node:fs";

const TIMEOUT_MS = 60_000;
const command = process.argv.slice(2);
const cacheDir = process.env.NODE_COMPILE_CACHE;
if (command.length === 0 || !cacheDir) {
  console.error("usage: NODE_COMPILE_CACHE=<folder> node scripts/warm-compile-cache.mjs <cli.js> start <worker entry> [args]");
  process.exit(2);
}

const child = spawn(process.execPath, command, {
  // One worker loads every module N would; port and metrics port are the image's defaults, free in a build.
  // BOOKSTORE_DB: keelson's example keeps its catalogue in memory here instead of writing a file into the image.
  env: { WORKERS: "1", BOOKSTORE_DB: ":memory:", ...process.env },
  stdio: ["ignore", "pipe", "inherit"],
});
let output = "";
let stopping = false;
const timer = setTimeout(() => {
  console.error(`warm-compile-cache: no "worker(s) ready" line within ${TIMEOUT_MS} ms:\n${output}`);
  child.kill("SIGKILL");
  process.exit(1);
}, TIMEOUT_MS);
child.stdout.setEncoding("utf8").on("data", (chunk) => {
  output += chunk;
  if (!stopping && /worker\(s\) ready in/.test(output)) {
    stopping = true;
    child.kill("SIGTERM");
  }
});
child.on("exit", (code, signal) => {
  clearTimeout(timer);
  if (!stopping || code !== 0) {
    console.error(`warm-compile-cache: the service exited (code ${code}, signal ${signal}) before it was stopped cleanly:\n${output}`);
    process.exit(1);
  }
  const entries = readdirSync(cacheDir, { recursive: true }).length;
  console.log(`warm-compile-cache: ${entries} entries in ${cacheDir}`);
});
