import { describe, expect, it } from "vitest";
import type { JobLeases, JobStore } from "../../src/index.js";

interface Row {
  owner: string;
  expiresAt: number;
  finished: boolean;
}

/**
 * A JobStore in memory on `Date.now()` (so vitest's fake timers drive it), for the scheduler's
 * in-process tests. `down` makes every call reject, as a database that cannot be reached;
 * `calls` records each call as "method owner".
 */
export class MemoryJobStore implements JobStore {
  readonly rows = new Map<string, Row>();
  readonly calls: string[] = [];
  down = false;

  constructor(readonly leaseMs = 4000) {}

  #row(job: string, at: Date): [string, Row | undefined] {
    const key = `${job}@${at.getTime()}`;
    return [key, this.rows.get(key)];
  }

  #call(method: string, owner: string): void {
    this.calls.push(`${method} ${owner}`);
    if (this.down) throw new Error("the store is down");
  }

  async claim(job: string, scheduledAt: Date, owner: string): Promise<boolean> {
    this.#call("claim", owner);
    const [key, row] = this.#row(job, scheduledAt);
    if (row !== undefined && (row.finished || row.expiresAt > Date.now())) return false;
    this.rows.set(key, { owner, expiresAt: Date.now() + this.leaseMs, finished: false });
    return true;
  }

  async renew(job: string, scheduledAt: Date, owner: string): Promise<boolean> {
    this.#call("renew", owner);
    const [, row] = this.#row(job, scheduledAt);
    if (row === undefined || row.owner !== owner || row.finished) return false;
    row.expiresAt = Date.now() + this.leaseMs;
    return true;
  }

  async finish(job: string, scheduledAt: Date, owner: string): Promise<boolean> {
    this.#call("finish", owner);
    const [, row] = this.#row(job, scheduledAt);
    if (row === undefined || row.owner !== owner || row.finished) return false;
    row.finished = true;
    return true;
  }

  async unfinished(job: string): Promise<JobLeases> {
    this.#call("unfinished", "-");
    const now = Date.now();
    const open = [...this.rows].filter(([key, row]) => key.startsWith(`${job}@`) && !row.finished);
    const live = open.map(([, row]) => row.expiresAt - now).filter((ms) => ms > 0);
    const expired = open.filter(([, row]) => row.expiresAt <= now).map(([key]) => new Date(Number(key.slice(job.length + 1))));
    return live.length > 0 ? { expired, nextExpiryMs: Math.min(...live) } : { expired };
  }
}

const never = new AbortController().signal;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The JobStore contract: every store (memory, SQLite, PostgreSQL) passes these, in real time.
 * `fresh` returns two handles on one empty store (two pods) whose `leaseMs` is 1000.
 */
export function describeJobStoreContract(name: string, fresh: () => Promise<[JobStore, JobStore]>): void {
  describe(`JobStore contract: ${name}`, () => {
    // A tick of this minute: a fixed date falls, days later, outside the SQL store's retention and is
    // pruned by its own finish.
    const at = new Date(Math.floor(Date.now() / 60_000) * 60_000);

    it("one claim of a tick wins; the other pod's loses while the lease lives, and after the finish", async () => {
      const [a, b] = await fresh();
      expect(a.leaseMs).toBe(1000);
      const claims = await Promise.all([a.claim("report", at, "pod-a", never), b.claim("report", at, "pod-b", never)]);
      expect(claims.filter(Boolean)).toHaveLength(1);
      const [winner, loser] = claims[0] ? [a, b] : [b, a];
      const [owner, other] = claims[0] ? ["pod-a", "pod-b"] : ["pod-b", "pod-a"];
      // The owner itself does not win it twice, and another job or tick is separate.
      expect(await winner.claim("report", at, owner, never)).toBe(false);
      expect(await loser.claim("other", at, other, never)).toBe(true);
      expect(await loser.claim("report", new Date(at.getTime() + 1000), other, never)).toBe(true);
      expect(await loser.renew("report", at, other, never)).toBe(false);
      expect(await loser.finish("report", at, other, never)).toBe(false);
      const leases = await loser.unfinished("report", never);
      expect(leases.expired).toEqual([]);
      expect(leases.nextExpiryMs).toBeGreaterThan(0);
      expect(leases.nextExpiryMs).toBeLessThanOrEqual(1000);
      expect(await winner.finish("report", at, owner, never)).toBe(true);
      expect(await winner.finish("report", at, owner, never)).toBe(false);
      await sleep(1100);
      expect(await loser.claim("report", at, other, never)).toBe(false);
      expect(await winner.renew("report", at, owner, never)).toBe(false);
    });

    it("a lease that runs out unfinished is listed as expired and taken over; the old owner can neither renew nor finish it", async () => {
      const [a, b] = await fresh();
      expect(await a.claim("report", at, "pod-a", never)).toBe(true);
      await sleep(600);
      expect(await a.renew("report", at, "pod-a", never)).toBe(true);
      await sleep(600);
      // Renewed: still live, 1.2 s after the claim.
      expect(await b.claim("report", at, "pod-b", never)).toBe(false);
      expect((await b.unfinished("report", never)).expired).toEqual([]);
      await sleep(1100);
      expect(await b.unfinished("report", never)).toEqual({ expired: [at] });
      expect(await b.claim("report", at, "pod-b", never)).toBe(true);
      expect(await a.renew("report", at, "pod-a", never)).toBe(false);
      expect(await a.finish("report", at, "pod-a", never)).toBe(false);
      expect(await b.finish("report", at, "pod-b", never)).toBe(true);
      expect(await a.unfinished("report", never)).toEqual({ expired: [] });
    });
  });
}
