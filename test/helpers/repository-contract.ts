import { describe, expect, it } from "vitest";
import { isKError, type Repository } from "../../src/index.js";

/** The entity of the contract suite: every column type, optional fields included. */
export interface Item {
  id: string;
  title: string;
  year?: number;
  rating?: number;
  available: boolean;
  tags: string[];
}

export const ITEM_COLUMNS = { id: "text", title: "text", year: "integer?", rating: "real?", available: "boolean", tags: "json" } as const;

const item = (n: number, extra: Partial<Item> = {}): Item => ({ id: `i${n}`, title: `Item ${n}`, available: n % 2 === 0, tags: [`t${n}`], ...extra });
const aborted = () => AbortSignal.abort(new DOMException("stop", "AbortError"));

/**
 * The `Repository` contract: every implementation (in-memory, SQLite, PostgreSQL) passes these.
 * `fresh` returns an empty repository of its own for each test.
 */
export function describeRepositoryContract(name: string, fresh: () => Promise<Repository<Item, string>>): void {
  describe(`Repository contract: ${name}`, () => {
    it("starts empty: an empty page envelope and a count of 0", async () => {
      const repo = await fresh();
      expect(await repo.findAll(undefined, { page: 1, limit: 20 })).toEqual({ data: [], total: 0, page: 1, limit: 20, total_pages: 0 });
      expect(await repo.count(undefined)).toBe(0);
    });

    it("creates and reads back every field; optional fields stay absent, unknown ids are undefined", async () => {
      const repo = await fresh();
      const full = item(1, { year: 1999, rating: 4.5, tags: ["a", "b c"], available: true });
      expect(await repo.create(undefined, full)).toStrictEqual(full);
      expect(await repo.create(undefined, item(2))).toStrictEqual(item(2));
      expect(await repo.findById(undefined, "i1")).toStrictEqual(full);
      expect(await repo.findById(undefined, "i2")).toStrictEqual(item(2));
      expect(await repo.findById(undefined, "nope")).toBeUndefined();
      expect(await repo.count(undefined)).toBe(2);
    });

    it("rejects a taken id with a 409 CONFLICT KError and keeps the first entity", async () => {
      const repo = await fresh();
      await repo.create(undefined, item(1));
      const error = await repo.create(undefined, item(1, { title: "other" })).then(() => undefined, (e: unknown) => e);
      expect(isKError(error) && { code: error.code, status: error.statusCode }).toEqual({ code: "CONFLICT", status: 409 });
      expect((await repo.findById(undefined, "i1"))?.title).toBe("Item 1");
      expect(await repo.count(undefined)).toBe(1);
    });

    it("pages in insertion order with the total, past the end included", async () => {
      const repo = await fresh();
      // Ids that sort differently from their insertion order.
      const ids = Array.from({ length: 25 }, (_, n) => 25 - n);
      for (const n of ids) await repo.create(undefined, item(n));
      const first = await repo.findAll(undefined, { page: 1, limit: 10 });
      expect(first).toMatchObject({ total: 25, page: 1, limit: 10, total_pages: 3 });
      expect(first.data.map((i) => i.id)).toEqual(ids.slice(0, 10).map((n) => `i${n}`));
      expect((await repo.findAll(undefined, { page: 3, limit: 10 })).data.map((i) => i.id)).toEqual(ids.slice(20).map((n) => `i${n}`));
      expect(await repo.findAll(undefined, { page: 4, limit: 10 })).toEqual({ data: [], total: 25, page: 4, limit: 10, total_pages: 3 });
    });

    it("updates in place (same position, optional fields cleared), and not a missing id", async () => {
      const repo = await fresh();
      for (const n of [1, 2, 3]) await repo.create(undefined, item(n, { year: 2000 + n }));
      const replaced = item(2, { title: "Two", tags: [], available: true });
      expect(await repo.update(undefined, "i2", replaced)).toStrictEqual(replaced);
      expect(await repo.findById(undefined, "i2")).toStrictEqual(replaced);
      expect((await repo.findAll(undefined, { page: 1, limit: 10 })).data.map((i) => i.id)).toEqual(["i1", "i2", "i3"]);
      expect(await repo.update(undefined, "i9", item(9))).toBeUndefined();
      expect(await repo.findById(undefined, "i9")).toBeUndefined();
    });

    it("deletes once: true, then false", async () => {
      const repo = await fresh();
      await repo.create(undefined, item(1));
      await repo.create(undefined, item(2));
      expect(await repo.delete(undefined, "i1")).toBe(true);
      expect(await repo.delete(undefined, "i1")).toBe(false);
      expect(await repo.findById(undefined, "i1")).toBeUndefined();
      expect(await repo.count(undefined)).toBe(1);
    });

    it("rejects every call with an aborted signal's reason and changes nothing", async () => {
      const repo = await fresh();
      await repo.create(undefined, item(1));
      const calls = [
        () => repo.findAll(aborted(), { page: 1, limit: 20 }), () => repo.findById(aborted(), "i1"),
        () => repo.create(aborted(), item(2)), () => repo.update(aborted(), "i1", item(1, { title: "changed" })),
        () => repo.delete(aborted(), "i1"), () => repo.count(aborted()),
      ];
      for (const call of calls) await expect(call()).rejects.toMatchObject({ name: "AbortError" });
      expect(await repo.findAll(undefined, { page: 1, limit: 20 })).toMatchObject({ total: 1, data: [item(1)] });
    });

    it("keeps every one of 50 concurrent creates", async () => {
      const repo = await fresh();
      const created = await Promise.all(Array.from({ length: 50 }, (_, n) => repo.create(undefined, item(n))));
      expect(new Set(created.map((i) => i.id)).size).toBe(50);
      const page = await repo.findAll(undefined, { page: 1, limit: 100 });
      expect(page.total).toBe(50);
      expect(page.data.map((i) => i.id).toSorted()).toEqual(created.map((i) => i.id).toSorted());
    });
  });
}
