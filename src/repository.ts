import { conflict } from "./errors.js";
import { newPage, pageOffset, type Page, type PageQuery } from "./pagination.js";

/**
 * The persistence contract of keelson add-ons: entity T, identifier ID, list query Q and page
 * result P. The official add-ons use `Q = PageQuery` and `P = Page<T>`.
 */
export interface Repository<T, ID, Q = PageQuery, P = Page<T>> {
  findAll(signal: AbortSignal | undefined, query: Q): Promise<P>;
  findById(signal: AbortSignal | undefined, id: ID): Promise<T | undefined>;
  /** Stores a new entity; rejects when its id is taken (the official implementations with a 409 `CONFLICT` KError). */
  create(signal: AbortSignal | undefined, entity: T): Promise<T>;
  /** Replaces the entity; resolves undefined when there is no such id. */
  update(signal: AbortSignal | undefined, id: ID, entity: T): Promise<T | undefined>;
  /** Resolves false when there was no such id. */
  delete(signal: AbortSignal | undefined, id: ID): Promise<boolean>;
  count(signal: AbortSignal | undefined): Promise<number>;
}

/**
 * The embedded default: a Map-backed repository that keeps insertion order. Good for tests,
 * examples and prototypes; not shared between cluster workers (each worker has its own copy).
 */
export class InMemoryRepository<T, ID = string> implements Repository<T, ID> {
  readonly #items = new Map<ID, T>();
  readonly #idOf: (entity: T) => ID;

  /** @param idOf reads an entity's identifier. */
  constructor(idOf: (entity: T) => ID, seed: Iterable<T> = []) {
    this.#idOf = idOf;
    for (const item of seed) this.#items.set(idOf(item), item);
  }

  async findAll(signal: AbortSignal | undefined, query: PageQuery): Promise<Page<T>> {
    signal?.throwIfAborted();
    const offset = pageOffset(query);
    const data = [...this.#items.values()].slice(offset, offset + query.limit);
    return newPage(data, this.#items.size, query.page, query.limit);
  }

  async findById(signal: AbortSignal | undefined, id: ID): Promise<T | undefined> {
    signal?.throwIfAborted();
    return this.#items.get(id);
  }

  /** Rejects with a 409 `CONFLICT` KError when the id is taken: create never overwrites. */
  async create(signal: AbortSignal | undefined, entity: T): Promise<T> {
    signal?.throwIfAborted();
    const id = this.#idOf(entity);
    if (this.#items.has(id)) throw conflict(`an entity with id ${String(id)} already exists`);
    this.#items.set(id, entity);
    return entity;
  }

  async update(signal: AbortSignal | undefined, id: ID, entity: T): Promise<T | undefined> {
    signal?.throwIfAborted();
    if (!this.#items.has(id)) return undefined;
    this.#items.set(id, entity);
    return entity;
  }

  async delete(signal: AbortSignal | undefined, id: ID): Promise<boolean> {
    signal?.throwIfAborted();
    return this.#items.delete(id);
  }

  async count(signal: AbortSignal | undefined): Promise<number> {
    signal?.throwIfAborted();
    return this.#items.size;
  }
}
