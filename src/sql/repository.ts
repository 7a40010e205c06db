import { conflict } from "../errors.js";
import {
  columnDDL, decodeValue, encodeValue, parseColumns, quoteIdentifier, type Column, type ColumnType,
} from "./columns.js";
import { isUniqueViolation } from "./errors.js";
import { newPage, pageOffset, type Page, type PageQuery } from "../pagination.js";
import type { Repository } from "../repository.js";
import type { SQLDatabase, SQLExecutor, SQLRow, SQLValue } from "./database.js";

export type { ColumnType } from "./columns.js";

/** Options of `createSQLRepository()`. */
export interface SQLRepositoryOptions<T> {
  /** The table; created on first use when missing. */
  table: string;
  /**
   * One column per entity field, named like the field: `text`, `integer`, `real`, `boolean` or
   * `json`, with a trailing `?` for an optional field (NULL in the database, absent from the entity).
   */
  columns: { [K in keyof T & string]-?: ColumnType };
  /** The identifying field (default `"id"`): unique; a second `create` with it is a 409 CONFLICT. */
  id?: keyof T & string;
  /** Entities inserted in the same transaction that creates the table, so exactly once per database. */
  seed?: readonly T[];
}

/** A `Repository` on a SQL table; `init()` creates the table (every method awaits it too). */
export interface SQLRepository<T, ID> extends Repository<T, ID> {
  /** Creates the table (and seeds it) unless it exists: safe when N workers start at once. */
  init(signal?: AbortSignal): Promise<void>;
}

/** The hidden column that keeps insertion order (the in-memory repository's order). */
const SEQ = '"keelson_seq"';

/**
 * A `Repository` on a table of a SQLite or PostgreSQL database: the same contract as
 * `InMemoryRepository` (insertion order, 409 on a taken id, `undefined`/`false` for a missing one),
 * shared by every process that opens the same database. A page is one query (`count(*) over()`).
 *
 * @example
 * const books = createSQLRepository<Book>(db, {
 *   table: "books",
 *   columns: { id: "text", title: "text", author: "text", year: "integer?" },
 * });
 */
export function createSQLRepository<T extends object, ID extends SQLValue = string>(
  db: SQLDatabase,
  options: SQLRepositoryOptions<T>,
): SQLRepository<T, ID> {
  const table = quoteIdentifier(options.table);
  const columns = parseColumns(options.columns as Record<string, ColumnType>);
  const idField = options.id ?? "id";
  const id = columns.find((c) => c.field === idField);
  if (!id) throw new TypeError(`createSQLRepository: the id field ${JSON.stringify(idField)} has no column`);
  const others = columns.filter((c) => c !== id);
  const list = columns.map((c) => c.sql).join(", ");
  const p = db.dialect === "postgres" ? (i: number) => `$${i}` : () => "?";
  const params = (n: number, from = 1) => Array.from({ length: n }, (_, i) => p(from + i)).join(", ");

  const sql = {
    insert: `INSERT INTO ${table} (${list}) VALUES (${params(columns.length)}) RETURNING ${list}`,
    page: `SELECT ${list}, count(*) over() AS "keelson_total" FROM ${table} ORDER BY ${SEQ} LIMIT ${p(1)} OFFSET ${p(2)}`,
    count: `SELECT count(*) AS "n" FROM ${table}`,
    byId: `SELECT ${list} FROM ${table} WHERE ${id.sql} = ${p(1)}`,
    update: `UPDATE ${table} SET ${others.map((c, i) => `${c.sql} = ${p(i + 1)}`).join(", ")} WHERE ${id.sql} = ${p(others.length + 1)} RETURNING ${list}`,
    delete: `DELETE FROM ${table} WHERE ${id.sql} = ${p(1)} RETURNING ${id.sql}`,
  };
  if (others.length === 0) sql.update = `SELECT ${list} FROM ${table} WHERE ${id.sql} = ${p(1)}`;

  const toRow = (entity: T, cols: readonly Column[]) => cols.map((c) => encodeValue(c, (entity as Record<string, unknown>)[c.field]));
  const fromRow = (row: SQLRow): T => {
    const entity: Record<string, unknown> = {};
    for (const c of columns) {
      const value = decodeValue(c, row[c.field]);
      if (value !== undefined) entity[c.field] = value;
    }
    return entity as T;
  };
  const insert = async (q: SQLExecutor, entity: T, signal: AbortSignal | undefined) => {
    try {
      const [row] = await q.query(sql.insert, toRow(entity, columns), signal);
      return fromRow(row!);
    } catch (error) {
      if (isUniqueViolation(error)) throw conflict(`an entity with id ${String((entity as Record<string, unknown>)[idField])} already exists`, error);
      throw error;
    }
  };

  let ready: Promise<void> | undefined;
  // The schema work is shared by every caller, so no one request's signal may cancel it.
  const init = async (signal?: AbortSignal): Promise<void> => {
    signal?.throwIfAborted();
    ready ??= db.migrate(async (tx) => {
      const exists = db.dialect === "postgres"
        ? (await tx.query(`SELECT to_regclass($1) IS NOT NULL AS "found"`, [table]))[0]?.found === true
        : (await tx.query(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`, [options.table])).length > 0;
      if (exists) return;
      const seq = db.dialect === "postgres" ? `${SEQ} bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY` : `${SEQ} INTEGER PRIMARY KEY AUTOINCREMENT`;
      const defs = columns.map((c) => columnDDL(c, db.dialect) + (c === id ? " UNIQUE" : ""));
      await tx.query(`CREATE TABLE IF NOT EXISTS ${table} (${seq}, ${defs.join(", ")})`);
      for (const entity of options.seed ?? []) await insert(tx, entity, undefined);
    });
    // A failed attempt (aborted, database down) is retried by the next call.
    ready.catch(() => (ready = undefined));
    await ready;
  };

  const count = async (signal: AbortSignal | undefined): Promise<number> => {
    await init(signal);
    return Number((await db.query(sql.count, [], signal))[0]?.n ?? 0);
  };

  return {
    init,
    count,
    async findAll(signal: AbortSignal | undefined, query: PageQuery): Promise<Page<T>> {
      await init(signal);
      const rows = await db.query(sql.page, [query.limit, pageOffset(query)], signal);
      // Past the last page there is no row to carry the total: ask for it.
      const total = rows.length > 0 ? Number(rows[0]!.keelson_total) : await count(signal);
      return newPage(rows.map(fromRow), total, query.page, query.limit);
    },
    async findById(signal: AbortSignal | undefined, key: ID): Promise<T | undefined> {
      await init(signal);
      const [row] = await db.query(sql.byId, [key], signal);
      return row && fromRow(row);
    },
    async create(signal: AbortSignal | undefined, entity: T): Promise<T> {
      await init(signal);
      return insert(db, entity, signal);
    },
    async update(signal: AbortSignal | undefined, key: ID, entity: T): Promise<T | undefined> {
      await init(signal);
      const values = others.length === 0 ? [key] : [...toRow(entity, others), key];
      const [row] = await db.query(sql.update, values, signal);
      return row && fromRow(row);
    },
    async delete(signal: AbortSignal | undefined, key: ID): Promise<boolean> {
      await init(signal);
      return (await db.query(sql.delete, [key], signal)).length > 0;
    },
  };
}
