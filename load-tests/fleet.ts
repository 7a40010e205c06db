// `make fleet`: the fleet scenario in full (load-tests/fleet/run.ts): 3 rolling-deploy steps.
// ROUNDS=N and RATE=R (requests per second through HAProxy) change it.
import { fileURLToPath } from "node:url";
import { killAllChildren } from "../test/helpers/child.js";
import { runFleet } from "./fleet/run.js";

const root = fileURLToPath(new URL("..", import.meta.url));
try {
  const result = await runFleet({ root, rounds: Number(process.env.ROUNDS || 3), rate: Number(process.env.RATE || 100) });
  process.exitCode = result.pass ? 0 : 1;
} finally {
  killAllChildren();
}
