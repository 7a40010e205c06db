import type { SQLValue } from "./database.js";

/** A portable column type; a trailing `?` makes the column nullable (the field optional). */
export type BaseColumnType = "text" | "integer" | "real" | "boolean" | "json";
export type ColumnType = BaseColumnType | `${BaseColumnType}?`;

export interface Column {
  field: string;
  /** The quoted identifier. */
  sql: string;
  type: BaseColumnType;
  nullable: boolean;
}

type Dialect = "sqlite" | "postgres";

const SQL_TYPES: Record<Dialect, Record<BaseColumnType, string>> = {
  sqlite: { text: "TEXT", integer: "INTEGER", real: "REAL", boolean: "INTEGER", json: "TEXT" },
  postgres: { text: "text", integer: "bigint", real: "double precision", boolean: "boolean", json: "jsonb" },
};

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** Quotes a table or column name; only plain identifiers are accepted, so nothing needs escaping. */
export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name)) throw new TypeError(`invalid SQL identifier ${JSON.stringify(name)}: use letters, digits and _`);
  return `"${name}"`;
}

export function parseColumns(columns: Record<string, ColumnType>): Column[] {
  return Object.entries(columns).map(([field, spec]) => {
    const nullable = spec.endsWith("?");
    const type = (nullable ? spec.slice(0, -1) : spec) as BaseColumnType;
    if (!(type in SQL_TYPES.sqlite)) throw new TypeError(`column ${field}: unknown type ${JSON.stringify(spec)}`);
    return { field, sql: quoteIdentifier(field), type, nullable };
  });
}

export function columnDDL(column: Column, dialect: Dialect): string {
  return `${column.sql} ${SQL_TYPES[dialect][column.type]}${column.nullable ? "" : " NOT NULL"}`;
}

/** An entity field as a bound parameter: undefined → NULL, JSON serialized. */
export function encodeValue(column: Column, value: unknown): SQLValue {
  if (value === undefined || value === null) return null;
  if (column.type === "json") return JSON.stringify(value);
  return value as SQLValue;
}

/** A column value as an entity field; NULL becomes an absent field (undefined). */
export function decodeValue(column: Column, value: unknown): unknown {
  if (value === null || value === undefined) return undefined;
  switch (column.type) {
    // PostgreSQL's bigint arrives as a string (it may exceed 2^53); SQLite's as a number.
    case "integer":
      return typeof value === "number" ? value : Number(value);
    case "boolean":
      return typeof value === "boolean" ? value : value !== 0;
    case "json":
      return typeof value === "string" ? JSON.parse(value) : value;
    default:
      return value;
  }
}
