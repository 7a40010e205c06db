import { describe, expect, expectTypeOf, it } from "vitest";
import {
  App, DEFAULT_LIMIT, DEFAULT_PAGE, InMemoryRepository, KError, MAX_LIMIT, get, newPage, pageOffset, parsePagination,
  type Page, type PageQuery, type Repository,
} from "../src/index.js";
import { captureLogs } from "./helpers/logs.js";

describe("parsePagination", () => {
  it("defaults to page 1, limit 20 (maximum 100)", () => {
    expect([DEFAULT_PAGE, DEFAULT_LIMIT, MAX_LIMIT]).toEqual([1, 20, 100]);
    expect(parsePagination({})).toEqual({ page: 1, limit: 20 });
    expect(parsePagination(undefined)).toEqual({ page: 1, limit: 20 });
  });

  it("reads valid values", () => {
    expect(parsePagination({ page: "3", limit: "50" })).toEqual({ page: 3, limit: 50 });
    expect(parsePagination({ page: "1", limit: "1" })).toEqual({ page: 1, limit: 1 });
    expect(parsePagination({ page: "+2", limit: " 7 " })).toEqual({ page: 2, limit: 7 });
    expect(parsePagination({ page: 4, limit: 10 })).toEqual({ page: 4, limit: 10 });
  });

  it.each([
    ["abc"], [""], ["2.5"], ["1e3"], ["0x10"], ["Infinity"], ["NaN"], ["12abc"], ["--1"],
  ])("treats non-numeric %j as missing", (value) => {
    expect(parsePagination({ page: value, limit: value })).toEqual({ page: 1, limit: 20 });
  });

  it("clamps: page < 1 → 1, limit < 1 → 20, limit > 100 → 100", () => {
    expect(parsePagination({ page: "0", limit: "0" })).toEqual({ page: 1, limit: 20 });
    expect(parsePagination({ page: "-5", limit: "-1" })).toEqual({ page: 1, limit: 20 });
    expect(parsePagination({ limit: "100" })).toEqual({ page: 1, limit: 100 });
    expect(parsePagination({ limit: "101" })).toEqual({ page: 1, limit: 100 });
    expect(parsePagination({ limit: "999999" })).toEqual({ page: 1, limit: 100 });
  });

  it("has no page maximum, but a page past Number.MAX_SAFE_INTEGER is non-numeric", () => {
    expect(parsePagination({ page: "1000000" }).page).toBe(1_000_000);
    expect(parsePagination({ page: "99999999999999999999" }).page).toBe(1);
  });

  it("takes the first of repeated values, and reads URLSearchParams", () => {
    expect(parsePagination({ page: ["2", "9"], limit: ["5"] })).toEqual({ page: 2, limit: 5 });
    expect(parsePagination(new URLSearchParams("page=4&limit=abc"))).toEqual({ page: 4, limit: 20 });
  });

  it("computes the offset as (page - 1) * limit", () => {
    expect(pageOffset({ page: 1, limit: 20 })).toBe(0);
    expect(pageOffset({ page: 3, limit: 25 })).toBe(50);
  });
});

describe("newPage", () => {
  it("builds the envelope with total_pages = ceil(total / limit)", () => {
    expect(newPage(["a", "b"], 45, 1, 20)).toEqual({ data: ["a", "b"], total: 45, page: 1, limit: 20, total_pages: 3 });
    expect(newPage([], 40, 3, 20).total_pages).toBe(2);
    expect(newPage([], 41, 1, 20).total_pages).toBe(3);
    expect(newPage([], 1, 1, 100).total_pages).toBe(1);
  });

  it("has total_pages 0 when there is nothing (or no page size)", () => {
    expect(newPage([], 0, 1, 20)).toEqual({ data: [], total: 0, page: 1, limit: 20, total_pages: 0 });
    expect(newPage([], 10, 1, 0).total_pages).toBe(0);
  });

  it("serialises with exactly the spec's JSON fields", () => {
    expect(JSON.stringify(newPage([1], 1, 1, 20))).toBe('{"data":[1],"total":1,"page":1,"limit":20,"total_pages":1}');
  });
});

describe("ctx.pagination() over HTTP", () => {
  const app = new App({ logger: captureLogs().logger });
  app.route(get("/items", (ctx) => ctx.pagination()));

  it.each([
    ["", { page: 1, limit: 20 }],
    ["?page=2&limit=5", { page: 2, limit: 5 }],
    ["?page=abc&limit=xyz", { page: 1, limit: 20 }],
    ["?page=-1&limit=-10", { page: 1, limit: 20 }],
    ["?page=0&limit=0", { page: 1, limit: 20 }],
    ["?limit=1000", { page: 1, limit: 100 }],
    ["?page=2.5&limit=1e2", { page: 1, limit: 20 }],
    ["?page=3&page=7", { page: 3, limit: 20 }],
  ])("%s → %j, never an error", async (query, expected) => {
    const res = await app.request(`/items${query}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual(expected);
  });
});

interface Item {
  id: number;
  name: string;
}

const items = (n: number): Item[] => Array.from({ length: n }, (_, i) => ({ id: i + 1, name: `item ${i + 1}` }));

describe("InMemoryRepository", () => {
  it("pages in insertion order with the envelope", async () => {
    const repo = new InMemoryRepository<Item, number>((item) => item.id, items(45));
    const second = await repo.findAll(undefined, { page: 2, limit: 20 });
    expect(second.data.map((i) => i.id)).toEqual(Array.from({ length: 20 }, (_, i) => i + 21));
    expect({ ...second, data: undefined }).toEqual({ data: undefined, total: 45, page: 2, limit: 20, total_pages: 3 });
    expect((await repo.findAll(undefined, { page: 3, limit: 20 })).data.map((i) => i.id)).toEqual([41, 42, 43, 44, 45]);
  });

  it("returns an empty page past the end, and total_pages 0 when empty", async () => {
    const repo = new InMemoryRepository<Item, number>((item) => item.id, items(3));
    expect(await repo.findAll(undefined, { page: 5, limit: 2 })).toEqual({ data: [], total: 3, page: 5, limit: 2, total_pages: 2 });
    const empty = new InMemoryRepository<Item, number>((item) => item.id);
    expect(await empty.findAll(undefined, { page: 1, limit: 20 })).toEqual({ data: [], total: 0, page: 1, limit: 20, total_pages: 0 });
  });

  it("creates, finds, updates, deletes and counts", async () => {
    const repo = new InMemoryRepository<Item, number>((item) => item.id);
    expect(await repo.create(undefined, { id: 1, name: "one" })).toEqual({ id: 1, name: "one" });
    expect(await repo.findById(undefined, 1)).toEqual({ id: 1, name: "one" });
    expect(await repo.findById(undefined, 2)).toBeUndefined();
    expect(await repo.update(undefined, 1, { id: 1, name: "uno" })).toEqual({ id: 1, name: "uno" });
    expect(await repo.update(undefined, 2, { id: 2, name: "two" })).toBeUndefined();
    expect(await repo.count(undefined)).toBe(1);
    expect(await repo.delete(undefined, 1)).toBe(true);
    expect(await repo.delete(undefined, 1)).toBe(false);
    expect(await repo.count(undefined)).toBe(0);
  });

  it("rejects a create with a taken id with a 409 CONFLICT KError, keeping the original", async () => {
    const repo = new InMemoryRepository<Item, number>((item) => item.id, [{ id: 1, name: "one" }]);
    const error = await repo.create(undefined, { id: 1, name: "impostor" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(KError);
    expect(error).toMatchObject({ code: "CONFLICT", statusCode: 409, message: "an entity with id 1 already exists" });
    expect(await repo.findById(undefined, 1)).toEqual({ id: 1, name: "one" });
  });

  it("rejects every operation once its signal has aborted", async () => {
    const repo = new InMemoryRepository<Item, number>((item) => item.id, items(1));
    const controller = new AbortController();
    controller.abort(new Error("request gone"));
    const signal = controller.signal;
    await expect(repo.findAll(signal, { page: 1, limit: 1 })).rejects.toThrow("request gone");
    await expect(repo.findById(signal, 1)).rejects.toThrow("request gone");
    await expect(repo.create(signal, { id: 2, name: "x" })).rejects.toThrow("request gone");
    await expect(repo.update(signal, 1, { id: 1, name: "x" })).rejects.toThrow("request gone");
    await expect(repo.delete(signal, 1)).rejects.toThrow("request gone");
    await expect(repo.count(signal)).rejects.toThrow("request gone");
    expect(await repo.count(undefined)).toBe(1);
  });

  it("implements Repository<T, ID, PageQuery, Page<T>>", () => {
    expectTypeOf<InMemoryRepository<Item, number>>().toMatchTypeOf<Repository<Item, number, PageQuery, Page<Item>>>();
    expectTypeOf<Repository<Item, number>["findAll"]>().parameter(1).toEqualTypeOf<PageQuery>();
    expectTypeOf<ReturnType<Repository<Item, number>["findAll"]>>().toEqualTypeOf<Promise<Page<Item>>>();
  });
});

describe("the Repository contract with other Q and P", () => {
  interface Cursor {
    after?: string;
    size: number;
  }
  interface CursorPage<T> {
    items: T[];
    next?: string;
  }

  /** A cursor-paginated repository: the contract does not force offset pagination. */
  class CursorRepo implements Repository<Item, number, Cursor, CursorPage<Item>> {
    readonly #all = items(5);
    async findAll(_signal: AbortSignal | undefined, query: Cursor): Promise<CursorPage<Item>> {
      const start = query.after === undefined ? 0 : this.#all.findIndex((i) => String(i.id) === query.after) + 1;
      const page = this.#all.slice(start, start + query.size);
      const last = page.at(-1);
      return { items: page, next: last && start + query.size < this.#all.length ? String(last.id) : undefined };
    }
    async findById(_signal: AbortSignal | undefined, id: number): Promise<Item | undefined> {
      return this.#all.find((i) => i.id === id);
    }
    async create(_signal: AbortSignal | undefined, entity: Item): Promise<Item> {
      this.#all.push(entity);
      return entity;
    }
    async update(_signal: AbortSignal | undefined, _id: number, entity: Item): Promise<Item | undefined> {
      return entity;
    }
    async delete(): Promise<boolean> {
      return false;
    }
    async count(): Promise<number> {
      return this.#all.length;
    }
  }

  it("accepts any query and page result types", async () => {
    const repo: Repository<Item, number, Cursor, CursorPage<Item>> = new CursorRepo();
    const first = await repo.findAll(undefined, { size: 2 });
    expect(first).toEqual({ items: items(2), next: "2" });
    const second = await repo.findAll(undefined, { after: first.next, size: 2 });
    expect(second.items.map((i) => i.id)).toEqual([3, 4]);
  });
});
