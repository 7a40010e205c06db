import type { StandardJSONSchemaV1, StandardSchemaV1 } from "@standard-schema/spec";

/** A JSON Schema (draft 2020-12) node, as libraries emit it. */
export type JSONSchema = { [key: string]: unknown };

/** Which side of a schema: what a client sends (`input`) or what a value parses to (`output`). */
export type SchemaSide = "input" | "output";

const TARGET = "draft-2020-12";
// A library may refuse types JSON cannot carry (zod: z.date(), z.bigint()); the retry asks it to
// emit `{}` for those parts instead. Other libraries ignore options they do not know.
const LENIENT = { unrepresentable: "any" };

/**
 * The JSON Schema of one side of a Standard Schema, through the Standard JSON Schema interface
 * (`~standard.jsonSchema`), so any library implementing it works; undefined when the library
 * does not implement it or cannot convert this schema. The result is a fresh object per call.
 */
export function readJSONSchema(schema: StandardSchemaV1, side: SchemaSide): JSONSchema | undefined {
  const props = schema["~standard"] as Partial<StandardJSONSchemaV1.Props>;
  const converter = props.jsonSchema;
  if (typeof converter?.[side] !== "function") return undefined;
  try {
    return converter[side]({ target: TARGET });
  } catch {
    try {
      return converter[side]({ target: TARGET, libraryOptions: LENIENT });
    } catch {
      return undefined;
    }
  }
}

/** The node a local `$ref` (`#/$defs/Name`, or `#` for the root) points to inside `root`. */
export function resolveLocalRef(root: JSONSchema, node: JSONSchema, depth = 0): JSONSchema {
  const ref = node.$ref;
  if (typeof ref !== "string" || depth > 16) return node;
  if (ref === "#") return root;
  const match = /^#\/\$defs\/(.+)$/.exec(ref);
  const defs = root.$defs as Record<string, JSONSchema> | undefined;
  const target = match && defs ? defs[decodePointer(match[1]!)] : undefined;
  return target ? resolveLocalRef(root, target, depth + 1) : node;
}

/** JSON Pointer unescaping of one reference token (`~1` is `/`, `~0` is `~`). */
export function decodePointer(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}
