import type { StandardJSONSchemaV1, StandardSchemaV1 } from "@standard-schema/spec";
import { DEFAULT_LIMIT, DEFAULT_PAGE, MAX_LIMIT, type Page, type PageQuery } from "./pagination.js";

/** A schema keelson can validate with and document: Standard Schema and Standard JSON Schema at once. */
export type DocumentedSchema<Input, Output = Input> = StandardSchemaV1<Input, Output> & StandardJSONSchemaV1<Input, Output>;

type Props<Input, Output> = StandardSchemaV1.Props<Input, Output> & StandardJSONSchemaV1.Props<Input, Output>;
type JSONObject = Record<string, unknown>;
type Issue = StandardSchemaV1.Issue;

const VENDOR = "keelson";
const TARGETS = new Set(["draft-2020-12", "draft-07", "openapi-3.0"]);

function checkTarget(options: StandardJSONSchemaV1.Options): void {
  if (!TARGETS.has(options.target)) throw new Error(`keelson's page schemas have no JSON Schema for target "${options.target}"`);
}

function schema<Input, Output>(
  validate: (value: unknown) => StandardSchemaV1.Result<Output> | Promise<StandardSchemaV1.Result<Output>>,
  jsonSchema: (side: "input" | "output", options: StandardJSONSchemaV1.Options) => JSONObject,
): DocumentedSchema<Input, Output> {
  const props: Props<Input, Output> = {
    version: 1,
    vendor: VENDOR,
    validate,
    jsonSchema: {
      input: (options) => (checkTarget(options), jsonSchema("input", options)),
      output: (options) => (checkTarget(options), jsonSchema("output", options)),
    },
  };
  return { "~standard": props };
}

/** An integer from a number or a decimal string (a query value before or after coercion). */
function readInteger(value: unknown): number | undefined {
  if (typeof value === "number") return Number.isSafeInteger(value) ? value : undefined;
  if (typeof value !== "string" || !/^\s*[+-]?\d+\s*$/.test(value)) return undefined;
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : undefined;
}

const PAGE_DESCRIPTION = "1-based page number (default 1; values below 1 become 1)";
const LIMIT_DESCRIPTION = `Page size (default ${DEFAULT_LIMIT}; below 1 becomes ${DEFAULT_LIMIT}, above ${MAX_LIMIT} becomes ${MAX_LIMIT})`;

/**
 * The query schema of a paginated list: `page` (default 1) and `limit` (default 20, at most 100),
 * each an integer. Out-of-range values are clamped as `ctx.pagination()` clamps them (page below 1
 * → 1, limit below 1 → 20, above 100 → 100); a value that is not an integer (`?page=two`,
 * `?limit=2.5`) is a 422. Other query keys are dropped: `ctx.query` is `{ page, limit }`.
 * Not tied to a schema library: a Standard Schema with its own JSON Schema.
 *
 * @example
 * get("/books", { query: pageQuery, responses: { 200: pageOf(Book) } }, (ctx) => books.findAll(ctx.event.req.signal, ctx.query));
 */
export const pageQuery: DocumentedSchema<{ page?: number | string; limit?: number | string }, PageQuery> = schema<{ page?: number | string; limit?: number | string }, PageQuery>(
  (value) => {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return { issues: [{ message: "Expected an object", path: [] }] };
    const query = value as Record<string, unknown>;
    const issues: Issue[] = [];
    const read = (key: "page" | "limit"): number | undefined => {
      const raw = query[key];
      if (raw === undefined || raw === "") return undefined;
      const n = readInteger(raw);
      if (n === undefined) issues.push({ message: Array.isArray(raw) ? "Expected one integer, got several values" : "Expected an integer", path: [key] });
      return n;
    };
    const page = read("page");
    const limit = read("limit");
    if (issues.length > 0) return { issues };
    return {
      value: {
        page: page === undefined || page < 1 ? DEFAULT_PAGE : page,
        limit: limit === undefined || limit < 1 ? DEFAULT_LIMIT : Math.min(limit, MAX_LIMIT),
      },
    };
  },
  (side) => {
    const properties = {
      page: { type: "integer", minimum: 1, default: DEFAULT_PAGE, description: PAGE_DESCRIPTION },
      limit: { type: "integer", minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: LIMIT_DESCRIPTION },
    };
    return side === "input"
      ? { type: "object", properties }
      : { type: "object", properties, required: ["page", "limit"], additionalProperties: false };
  },
);

const ENVELOPE_FIELDS = {
  total: { type: "integer", minimum: 0, description: "Items in every page together" },
  page: { type: "integer", minimum: 1, description: "This page's number (1-based)" },
  limit: { type: "integer", minimum: 1, description: "Page size" },
  total_pages: { type: "integer", minimum: 0, description: "ceil(total / limit); 0 when there is nothing" },
} as const;

const LOCAL_DEF = /^#\/\$defs\/([^/]+)$/;

/** Options of {@link pageOf}. */
export interface PageOfOptions {
  /**
   * The envelope's name in the document's `components.schemas`. Default: the item's name plus
   * `Page` (`BookPage`) when the item has one (zod: `.meta({ id })`), else the envelope is inline.
   */
  id?: string;
}

/**
 * The schema of a page of `item`: the envelope `newPage()` and repositories' `findAll` build
 * (`data`, `total`, `page`, `limit`, `total_pages`). As a response schema it documents the list
 * route's body and writes only those fields (and each item's declared fields). `item` is any
 * Standard Schema; its JSON Schema (Standard JSON Schema) is nested as `data`'s items.
 *
 * @example
 * get("/books", { query: pageQuery, responses: { 200: pageOf(Book) } }, (ctx) => books.findAll(ctx.event.req.signal, ctx.query));
 */
export function pageOf<Item extends StandardSchemaV1>(
  item: Item, options: PageOfOptions = {},
): DocumentedSchema<Page<StandardSchemaV1.InferInput<Item>>, Page<StandardSchemaV1.InferOutput<Item>>> {
  type Out = Page<StandardSchemaV1.InferOutput<Item>>;
  if (options.id !== undefined && !/^[A-Za-z0-9._-]+$/.test(options.id)) {
    throw new TypeError(`pageOf: options.id must match [A-Za-z0-9._-]+, got ${JSON.stringify(options.id)}`);
  }
  const validateItem = item["~standard"].validate;
  return schema<Page<StandardSchemaV1.InferInput<Item>>, Out>(
    (value) => {
      if (typeof value !== "object" || value === null || Array.isArray(value)) return { issues: [{ message: "Expected a page object", path: [] }] };
      const page = value as Record<string, unknown>;
      const issues: Issue[] = [];
      for (const key of ["total", "page", "limit", "total_pages"] as const) {
        if (typeof page[key] !== "number" || !Number.isSafeInteger(page[key])) issues.push({ message: "Expected an integer", path: [key] });
      }
      if (!Array.isArray(page.data)) return { issues: [...issues, { message: "Expected an array", path: ["data"] }] };
      const results = page.data.map((entry) => validateItem(entry));
      const finish = (settled: readonly StandardSchemaV1.Result<unknown>[]): StandardSchemaV1.Result<Out> => {
        const data: unknown[] = [];
        settled.forEach((result, index) => {
          if (result.issues) for (const issue of result.issues) issues.push({ message: issue.message, path: ["data", index, ...(issue.path ?? [])] });
          else data.push(result.value);
        });
        if (issues.length > 0) return { issues };
        const { total, page: number, limit, total_pages } = page as unknown as Out;
        return { value: { data, total, page: number, limit, total_pages } as Out };
      };
      return results.some((r) => r instanceof Promise) ? Promise.all(results).then(finish) : finish(results as StandardSchemaV1.Result<unknown>[]);
    },
    (side, jsonOptions) => {
      const converter = (item["~standard"] as Partial<StandardJSONSchemaV1.Props>).jsonSchema;
      if (typeof converter?.[side] !== "function") throw new Error("pageOf: the item schema has no JSON Schema (Standard JSON Schema)");
      const { $schema, $defs, ...itemRoot } = converter[side](jsonOptions);
      const envelope: JSONObject = {
        type: "object",
        properties: { data: { type: "array", items: itemRoot, description: "The items of this page" }, ...ENVELOPE_FIELDS },
        required: ["data", "total", "page", "limit", "total_pages"],
        ...(side === "output" && { additionalProperties: false }),
      };
      const itemName = typeof itemRoot.$ref === "string" ? LOCAL_DEF.exec(itemRoot.$ref)?.[1] : undefined;
      const id = options.id ?? (itemName === undefined ? undefined : `${itemName}Page`);
      const head = $schema === undefined ? {} : { $schema };
      if (id === undefined) return { ...head, ...envelope, ...($defs !== undefined && { $defs }) };
      return { ...head, $ref: `#/$defs/${id}`, $defs: { ...($defs as JSONObject | undefined), [id]: envelope } };
    },
  );
}
