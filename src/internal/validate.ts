import type { StandardSchemaV1 } from "@standard-schema/spec";
import { validationError, type FieldError } from "../errors.js";

/** Where a value came from; prefixes each failing field's path in the 422 body. */
export type InputPart = "params" | "query" | "body";

type JSONSchemaNode = { type?: string | string[]; items?: JSONSchemaNode; anyOf?: JSONSchemaNode[]; oneOf?: JSONSchemaNode[] };

interface JSONSchemaCapable {
  "~standard": { jsonSchema?: { input(options: { target: string }): Record<string, unknown> } };
}

/** The JSON Schema of a Standard Schema's input side, when its library implements Standard JSON Schema. */
export function inputJSONSchema(schema: StandardSchemaV1): Record<string, unknown> | undefined {
  const converter = (schema as unknown as JSONSchemaCapable)["~standard"].jsonSchema;
  if (!converter) return undefined;
  try {
    return converter.input({ target: "draft-2020-12" });
  } catch {
    return undefined;
  }
}

function typesOf(node: JSONSchemaNode | undefined): Set<string> {
  const out = new Set<string>();
  if (!node) return out;
  if (typeof node.type === "string") out.add(node.type);
  else if (Array.isArray(node.type)) for (const t of node.type) out.add(t);
  for (const sub of [...(node.anyOf ?? []), ...(node.oneOf ?? [])]) for (const t of typesOf(sub)) out.add(t);
  return out;
}

function coerceScalar(value: string, types: Set<string>): unknown {
  if (types.has("string") || types.size === 0) return value;
  if ((types.has("number") || types.has("integer")) && value.trim() !== "" && Number.isFinite(Number(value))) {
    return Number(value);
  }
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
  const json = inputJSONSchema(schema) as { properties?: Record<string, JSONSchemaNode> } | undefined;
  const properties = json?.properties;
  if (!properties) return undefined;
  const plan = Object.entries(properties).map(([key, node]) => {
    const types = typesOf(node);
    return { key, types, array: types.has("array"), itemTypes: typesOf(node.items) };
  });
  return function coerce(raw) {
    const out: Record<string, unknown> = { ...raw };
    for (const { key, types, array, itemTypes } of plan) {
      const value = raw[key];
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
  return issues.map((issue) => ({ path: pathOf(part, issue), message: issue.message }));
}

function settle(part: InputPart, result: StandardSchemaV1.Result<unknown>): unknown {
  if (result.issues) throw validationError(toFieldErrors(part, result.issues));
  return result.value;
}

/**
 * Validates one input part. Returns the parsed value, or a promise of it for async schemas;
 * throws a 422 `VALIDATION_ERROR` KError listing each failing field.
 */
export function validateInput(part: InputPart, schema: StandardSchemaV1, value: unknown): unknown {
  let result: StandardSchemaV1.Result<unknown> | Promise<StandardSchemaV1.Result<unknown>>;
  try {
    result = schema["~standard"].validate(value);
  } catch (error) {
    // A validator that overflows the stack on absurdly deep input is still the client's fault.
    if (error instanceof RangeError) throw validationError([{ path: part, message: "Input is nested too deeply" }]);
    throw error;
  }
  return result instanceof Promise ? result.then((r) => settle(part, r)) : settle(part, result);
}
