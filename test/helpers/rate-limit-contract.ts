import { expect, it } from "vitest";
import type { RateLimitStore, RateLimitTake } from "../../src/index.js";
import { freePort, spawnChild } from "./child.js";
import { hitMany } from "./hits.js";

const MINUTE = 60_000;
const T0 = 29_000_000 * MINUTE;

export const take = (over: Partial<RateLimitTake> = {}): RateLimitTake => ({
  key: "api:203.0.113.7", limit: 100, windowMs: MINUTE, algorithm: "fixed", now: T0 + 1000, want: 3, ...over,
});

/**
 * The `RateLimitStore` contract every shared store passes (SQLite, PostgreSQL, Redis), with the
 * same numbers as the memory store. `machines` returns two handles on one fresh, empty store (two
 * pods with their own connections). Call inside a `describe`.
 */
export function rateLimitStoreContract(machines: () => Promise<RateLimitStore[]>): void {
  it("concurrent leases from two connections never grant more than the limit, and shrink near the end", async () => {
    const stores = await machines();
    const grants = await Promise.all(Array.from({ length: 120 }, (_, i) => stores[i % 2]!.take(take())));
    expect(grants.reduce((sum, g) => sum + g.granted, 0)).toBe(100);
    expect(grants.every((g) => g.granted <= 3)).toBe(true);
    const refused = await stores[0]!.take(take());
    expect(refused).toEqual({ granted: 0, remaining: 0, resetMs: 59_000, retryMs: 59_000 });
    // Another key, and the next window, start afresh.
    expect((await stores[1]!.take(take({ key: "api:198.51.100.1" }))).granted).toBe(3);
    expect(await stores[1]!.take(take({ now: T0 + MINUTE }))).toEqual({ granted: 3, remaining: 97, resetMs: 60_000, retryMs: 0 });
  });

  it("sliding: the previous window's count weighs in by how much of it still overlaps", async () => {
    const [store] = await machines();
    const sliding = (now: number, want: number) => store!.take(take({ algorithm: "sliding", limit: 10, now, want }));
    expect((await sliding(T0 + 5000, 10)).granted).toBe(2);
    let spent = 2;
    while (spent < 10) spent += (await sliding(T0 + 5000, 10)).granted;
    expect((await sliding(T0 + 5000, 10)).granted).toBe(0);
    // 30 s into the next window half of the previous 10 still count: 5 left, in shrinking leases.
    let granted = 0;
    for (let g = -1; g !== 0; granted += g) g = (await sliding(T0 + MINUTE + 30_000, 10)).granted;
    expect(granted).toBe(5);
    expect((await sliding(T0 + MINUTE + 30_000, 1)).retryMs).toBe(6000);
  });
}

/**
 * Two real services (test/fixtures/rate-limit-app.ts) with `env` choosing their shared store, a
 * limit of 50 and 300 requests spread over both: exactly 50 served, from both, the rest 429.
 */
export async function expectTwoServicesShareTheLimit(root: string, env: Record<string, string>): Promise<void> {
  const ports = [await freePort(), await freePort()];
  const services = ports.map((port) => spawnChild([process.execPath, "--import", "tsx", "test/fixtures/rate-limit-app.ts"],
    { cwd: root, env: { NODE_ENV: "production", RATE_LIMIT: "50", ...env, PORT: String(port) } }));
  await Promise.all(services.map((service) => service.waitFor(/listening on/, { timeoutMs: 30_000 })));
  const hits = await hitMany(ports, 300, 6);
  const served = hits.filter((h) => h.status === 200);
  expect(new Set(served.map((h) => (JSON.parse(h.body) as { pid: number }).pid)).size).toBe(2);
  expect(served).toHaveLength(50);
  expect(hits.filter((h) => h.status === 429 && Number(h.retryAfter) >= 1)).toHaveLength(250);
  await Promise.all(services.map((service) => service.stop()));
}
