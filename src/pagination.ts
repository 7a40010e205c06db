/** A page request: 1-based page number and page size. */
export interface PageQuery {
  page: number;
  limit: number;
}

/** The standard paginated response envelope. */
export interface Page<T> {
  data: T[];
  total: number;
  page: number;
  limit: number;
  total_pages: number;
}

export const DEFAULT_PAGE = 1;
export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;

/** A query value as h3/URLSearchParams give it: missing, one string, or repeated. */
type QueryValue = string | readonly string[] | number | null | undefined;

function toInt(value: QueryValue): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (typeof raw === "number") return Number.isFinite(raw) ? Math.trunc(raw) : undefined;
  if (typeof raw !== "string" || !/^\s*[+-]?\d+\s*$/.test(raw)) return undefined;
  const n = Number(raw);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Reads `page` and `limit` from a query object or URLSearchParams, never failing:
 * missing or non-numeric → defaults (1, 20); page < 1 → 1; limit < 1 → 20; limit > 100 → 100.
 * Non-integers such as `2.5` or `1e3` count as non-numeric; a page past MAX_SAFE_INTEGER → 1.
 */
export function parsePagination(
  query: URLSearchParams | Readonly<Record<string, QueryValue>> | undefined,
): PageQuery {
  const read = (key: string): QueryValue =>
    query instanceof URLSearchParams ? query.get(key) : query?.[key];
  const page = toInt(read("page"));
  const limit = toInt(read("limit"));
  return {
    page: page === undefined || page < 1 ? DEFAULT_PAGE : page,
    limit: limit === undefined || limit < 1 ? DEFAULT_LIMIT : Math.min(limit, MAX_LIMIT),
  };
}

/** The row offset of a page: `(page - 1) * limit`. */
export function pageOffset(query: PageQuery): number {
  return (query.page - 1) * query.limit;
}

/** Builds the envelope; `total_pages` is `ceil(total / limit)`, 0 when there is nothing. */
export function newPage<T>(data: T[], total: number, page: number, limit: number): Page<T> {
  return { data, total, page, limit, total_pages: limit > 0 ? Math.ceil(total / limit) : 0 };
}
