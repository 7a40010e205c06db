import type { StandardSchemaV1 } from "@standard-schema/spec";
import { decodePointer, readJSONSchema, type JSONSchema, type SchemaSide } from "../http/json-schema.js";

const DEFS_PREFIX = "#/$defs/";
// Values, not subschemas: a `$ref` string inside an example is data.
const DATA_KEYWORDS = new Set(["const", "default", "enum", "examples", "example"]);

/** One distinct body under one name: an id can mean two schemas (its input and output sides). */
interface Variant {
  readonly name: string;
  readonly def: JSONSchema;
  readonly sides: Set<SchemaSide>;
  final: string;
}

/** Component names must match `^[a-zA-Z0-9._-]+$`. */
function sanitize(name: string): string {
  return name.replace(/[^A-Za-z0-9._-]/g, "_") || "Schema";
}

function walk(node: unknown, visit: (node: JSONSchema) => void): void {
  if (Array.isArray(node)) {
    for (const item of node) walk(item, visit);
  } else if (node !== null && typeof node === "object") {
    visit(node as JSONSchema);
    for (const [key, value] of Object.entries(node)) if (!DATA_KEYWORDS.has(key)) walk(value, visit);
  }
}

function localName(ref: unknown): string | undefined {
  return typeof ref === "string" && ref.startsWith(DEFS_PREFIX) ? decodePointer(ref.slice(DEFS_PREFIX.length)) : undefined;
}

/** Names of the defs reachable from `node` (itself excluded unless a cycle leads back to it). */
function reachable(node: unknown, defs: Record<string, JSONSchema>, into = new Set<string>()): Set<string> {
  walk(node, (n) => {
    const name = localName(n.$ref);
    if (name !== undefined && defs[name] && !into.has(name)) {
      into.add(name);
      reachable(defs[name], defs, into);
    }
  });
  return into;
}

/**
 * Collects the schemas of one document. Schemas that carry an id (zod: `.meta({ id })`) come
 * out of Standard JSON Schema as `$defs`; they are lifted into `components.schemas` and every
 * `$ref` is rewritten. Names are settled in `finalize()`: when an id's input and output sides
 * differ (output objects are closed, defaults are required), the output keeps the name and the
 * input becomes `<id>Input`; unrelated schemas sharing an id get a numeric suffix.
 */
export class SchemaCollector {
  readonly #reserved: Record<string, JSONSchema>;
  readonly #variants = new Map<string, Variant>();
  readonly #refs: { node: JSONSchema; variant: Variant }[] = [];

  constructor(reserved: Record<string, JSONSchema> = {}) {
    this.#reserved = reserved;
  }

  /** One side of a Standard Schema, ready to embed; undefined when it cannot be converted. */
  add(schema: StandardSchemaV1, side: SchemaSide, hint: string): JSONSchema | undefined {
    const json = readJSONSchema(schema, side);
    return json && this.addJSON(json, side, hint);
  }

  /**
   * A JSON Schema whose `$ref`s point into `$defs` (its own, or `defs` when given). Only the
   * defs it reaches become components. A root that refers to itself (`$ref: "#"`, a recursive
   * schema without an id) is lifted too, under `hint`.
   */
  addJSON(json: JSONSchema, side: SchemaSide, hint: string, defs?: Record<string, JSONSchema>): JSONSchema {
    const { $schema: _dialect, $defs: own, ...root } = json;
    const local: Record<string, JSONSchema> = { ...(defs ?? (own as Record<string, JSONSchema> | undefined)) };
    let embedded: JSONSchema = root;
    let selfRef = false;
    walk(root, (n) => {
      if (n.$ref === "#") selfRef = true;
    });
    if (selfRef) {
      const name = sanitize(hint);
      walk(root, (n) => {
        if (n.$ref === "#") n.$ref = DEFS_PREFIX + name;
      });
      local[name] = root;
      embedded = { $ref: DEFS_PREFIX + name };
    }
    const names = reachable(embedded, local);
    const variants = new Map<string, Variant>();
    for (const name of names) variants.set(name, this.#variant(name, local, side));
    const fresh = new Set<JSONSchema>();
    for (const [name, variant] of variants) if (variant.def === local[name]) fresh.add(variant.def);
    // Refs inside a def are rewritten only where that def object is the one kept.
    for (const node of [embedded, ...fresh]) {
      walk(node, (n) => {
        const name = localName(n.$ref);
        const variant = name === undefined ? undefined : variants.get(name);
        if (variant) this.#refs.push({ node: n, variant });
      });
    }
    return embedded;
  }

  #variant(name: string, defs: Record<string, JSONSchema>, side: SchemaSide): Variant {
    // Identity is the def plus everything it reaches: `[Author]` differs when Author does.
    const closure = [...reachable(defs[name], defs).add(name)].toSorted();
    const key = JSON.stringify(closure.map((n) => [n, defs[n]]));
    let variant = this.#variants.get(key);
    if (!variant) {
      variant = { name: sanitize(name), def: defs[name]!, sides: new Set(), final: "" };
      this.#variants.set(key, variant);
    }
    variant.sides.add(side);
    return variant;
  }

  /** Settles names, points every collected `$ref` at `#/components/schemas/…`, returns the schemas. */
  finalize(): Record<string, JSONSchema> {
    const taken = new Set(Object.keys(this.#reserved));
    const unique = (base: string) => {
      let name = base;
      for (let n = 2; taken.has(name); n++) name = `${base}${n}`;
      taken.add(name);
      return name;
    };
    const byName = new Map<string, Variant[]>();
    for (const variant of this.#variants.values()) byName.set(variant.name, [...(byName.get(variant.name) ?? []), variant]);
    for (const [name, variants] of byName) {
      const primary = variants.find((v) => v.sides.has("output")) ?? variants[0]!;
      primary.final = unique(name);
      for (const v of variants) if (v !== primary) v.final = unique(v.sides.has("output") ? name : `${name}Input`);
    }
    for (const { node, variant } of this.#refs) node.$ref = `#/components/schemas/${variant.final}`;
    const schemas: Record<string, JSONSchema> = { ...this.#reserved };
    for (const variant of this.#variants.values()) schemas[variant.final] = variant.def;
    return schemas;
  }
}
