import type { StandardSchemaV1 } from "@standard-schema/spec";
import { validationError, type FieldError } from "../errors.js";
import { readJSONSchema, resolveLocalRef, type JSONSchema } from "./json-schema.js";

/** Where a value came from; prefixes each failing field's path in the 422 body. */
export type InputPart = "params" | "query" | "body";

/** At most this many failing fields are listed: a 1 MiB array of bad items must not echo back as 20 MiB. */
export const MAX_FIELD_ERRORS = 100;

type JSONSchemaNode = {
  type?: string | string[];
  items?: JSONSchemaNode;
  anyOf?: JSONSchemaNode[];
  oneOf?: JSONSchemaNode[];
  allOf?: JSONSchemaNode[];
  properties?: Record<string, JSONSchemaNode>;
};

function typesOf(root: JSONSchema, node: JSONSchemaNode | undefined, out = new Set<string>(), depth = 0): Set<string> {
  if (!node || depth > 16) return out;
  const resolved = resolveLocalRef(root, node) as JSONSchemaNode;
  if (typeof resolved.type === "string") out.add(resolved.type);
  else if (Array.isArray(resolved.type)) for (const t of resolved.type) out.add(t);
  for (const sub of [...(resolved.anyOf ?? []), ...(resolved.oneOf ?? []), ...(resolved.allOf ?? [])]) {
    typesOf(root, sub, out, depth + 1);
  }
  return out;
}

// Plain decimal notation only: Number() alone would also take "0x10", "0b1", " " and "".
const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

function coerceScalar(value: string, types: Set<string>): unknown {
  if (types.has("string") || types.size === 0) return value;
  if ((types.has("number") || types.has("integer")) && DECIMAL.test(value)) return Number(value);
  if (types.has("boolean") && (value === "true" || value === "false")) return value === "true";
  if (types.has("null") && value === "") return null;
  return value;
}

export type Coercer = (raw: Record<string, string | string[]>) => Record<string, unknown>;

/**
 * Builds, once per route, a function that turns query/path strings into the types the schema
 * expects (`?limit=10` → 10 for a number, `?tag=a` → ["a"] for an array). Values the schema does
 * not describe, or that do not parse, are left as strings so the validator reports them.
 */
export function createCoercer(schema: StandardSchemaV1): Coercer | undefined {
  const root = readJSONSchema(schema, "input");
  // A schema with an id comes back as `{ $ref: "#/$defs/Id", $defs }`: coerce what the ref names.
  const properties = root && (resolveLocalRef(root, root) as JSONSchemaNode).properties;
  if (!root || !properties) return undefined;
  const plan = Object.entries(properties).map(([key, node]) => {
    const types = typesOf(root, node);
    const items = (resolveLocalRef(root, node) as JSONSchemaNode).items;
    return { key, types, array: types.has("array"), itemTypes: typesOf(root, items) };
  });
  return function coerce(raw) {
    // Prototype-free like the raw query: a schema key such as `constructor` that was not sent
    // must read as missing, and a key `__proto__` must be data, not a prototype to set.
    const out: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, raw);
    for (const { key, types, array, itemTypes } of plan) {
      const value = Object.hasOwn(raw, key) ? raw[key] : undefined;
      if (value === undefined) continue;
      if (array) out[key] = (Array.isArray(value) ? value : [value]).map((v) => coerceScalar(v, itemTypes));
      else out[key] = coerceScalar(Array.isArray(value) ? (value[value.length - 1] ?? "") : value, types);
    }
    return out;
  };
}

function pathOf(part: InputPart, issue: StandardSchemaV1.Issue): string {
  const segments = (issue.path ?? []).map((s) => String(typeof s === "object" ? s.key : s));
  return [part, ...segments].join(".");
}

function toFieldErrors(part: InputPart, issues: readonly StandardSchemaV1.Issue[]): FieldError[] {
  return issues.slice(0, MAX_FIELD_ERRORS).map((issue) => ({ path: pathOf(part, issue), message: issue.message }));
}

function settle(part: InputPart, result: StandardSchemaV1.Result<unknown>): unknown {
  if (result.issues) throw validationError(toFieldErrors(part, result.issues));
  return result.value;
}

/** A validator that overflows the stack on absurdly deep input: still the client's fault. */
function rethrow(part: InputPart, error: unknown): never {
  if (error instanceof RangeError) throw validationError([{ path: part, message: "Input is nested too deeply" }]);
  throw error;
}

/**
 * Validates one input part. Returns the parsed value, or a promise of it for async schemas;
 * throws a 422 `VALIDATION_ERROR` KError listing each failing field (the first 100).
 */
export function validateInput(part: InputPart, schema: StandardSchemaV1, value: unknown): unknown {
  let result: StandardSchemaV1.Result<unknown> | Promise<StandardSchemaV1.Result<unknown>>;
  try {
    result = schema["~standard"].validate(value);
  } catch (error) {
    rethrow(part, error);
  }
  return result instanceof Promise
    ? result.then((r) => settle(part, r), (error: unknown) => rethrow(part, error))
    : settle(part, result);
}
