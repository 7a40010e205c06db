// The fleet scenario's short form (`make fleet` is the full one): 3 pods × 2 workers behind HAProxy with
// PostgreSQL, Redis and Prometheus, one rolling-deploy step and a pod SIGKILLed under load.
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { runFleet } from "../load-tests/fleet/run.js";
import { killAllChildren } from "./helpers/child.js";

afterAll(killAllChildren);

it("rate limits exact across pods, a rolling deploy with no failed request, a killed pod's tick re-run, Prometheus in step", async () => {
  const result = await runFleet({ root: fileURLToPath(new URL("..", import.meta.url)), rounds: 1, rate: 50, log: () => {} });
  expect(result.line).toMatch(/^VERDICT fleet: PASS/);
  expect(result.numbers).toMatchObject({ failedDuringDeploy: 0, missingTicks: 0, doubledTicks: 0, allowedRedis: 100, allowedPostgres: 100, resets: 0 });
}, 300_000);
