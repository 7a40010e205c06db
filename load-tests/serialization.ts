// Per-route cost of writing a response body (text and its UTF-8 bytes), on the example's routes and values: what keelson did
// before response schemas (JSON.stringify of whatever the handler returns, undeclared fields
// included), JSON.stringify after stripping (by the schema's validation, or by a walk of its JSON
// Schema), and what keelson does now (fast-json-stringify from the schema's JSON Schema, plus
// the schema's validation outside production).
//   node --import tsx load-tests/serialization.ts [--rounds 7] [--ms 300]
import { parseArgs } from "node:util";
import fastJSONStringify from "fast-json-stringify";
import type { StandardSchemaV1 } from "@standard-schema/spec";
import { Book } from "../examples/bookstore/books.js";
import { newPage, pageOf } from "../src/index.js";
import { readJSONSchema, type JSONSchema } from "../src/http/json-schema.js";
import { z } from "zod";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "7" }, ms: { type: "string", default: "300" } } });
const rounds = Number(values.rounds);
const budgetMs = Number(values.ms);

const Greeting = z.object({ message: z.string(), lang: z.enum(["en", "fr", "de"]) });
/** A row as a database hands it over: the declared columns and one that must not leave. */
const row = (i: number) => ({ id: `b${i}`, title: `Book number ${i}`, author: "Martin Kleppmann", year: 2017, password_hash: "$2b$12$abcdefghijklmnopqrstuv" });

const ROUTES: { name: string; schema: StandardSchemaV1; value: unknown }[] = [
  { name: "GET /hello (Greeting)", schema: Greeting, value: { message: "Hello, world!", lang: "en" } },
  { name: "GET /api/books/:id (Book)", schema: Book, value: row(42) },
  { name: "POST /api/books 201 (Book)", schema: Book, value: row(7) },
  { name: "GET /api/books (page of 20 Books)", schema: pageOf(Book), value: newPage(Array.from({ length: 20 }, (_, i) => row(i)), 45, 1, 20) },
];

/** A stripper compiled from a JSON Schema: keeps declared properties (objects, arrays, local $refs). */
function compileStrip(root: JSONSchema): (value: unknown) => unknown {
  const defs = (root.$defs ?? {}) as Record<string, JSONSchema>;
  const build = (node: JSONSchema): ((value: unknown) => unknown) => {
    if (typeof node.$ref === "string") {
      let target: ((value: unknown) => unknown) | undefined;
      const name = node.$ref.slice("#/$defs/".length);
      return (value) => (target ??= build(defs[name]!))(value);
    }
    if (node.type === "object" && node.properties) {
      const keys = Object.entries(node.properties as Record<string, JSONSchema>).map(([key, child]) => [key, build(child)] as const);
      return (value) => {
        const source = value as Record<string, unknown>;
        const out: Record<string, unknown> = {};
        for (const [key, strip] of keys) if (source[key] !== undefined) out[key] = strip(source[key]);
        return out;
      };
    }
    if (node.type === "array" && node.items) {
      const item = build(node.items as JSONSchema);
      return (value) => (value as unknown[]).map(item);
    }
    return (value) => value;
  };
  return build(root);
}

/**
 * CPU nanoseconds per call (process.cpuUsage, so time the machine gives other processes does not
 * count): the median of `rounds` rounds of `budgetMs` of wall time each.
 */
function measure(run: () => unknown): number {
  for (let i = 0; i < 20_000; i++) run();
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let calls = 0;
    const end = performance.now() + budgetMs;
    const cpu = process.cpuUsage();
    while (performance.now() < end) {
      for (let i = 0; i < 1000; i++) run();
      calls += 1000;
    }
    const used = process.cpuUsage(cpu);
    perRound.push(((used.user + used.system) * 1000) / calls);
  }
  return perRound.toSorted((a, b) => a - b)[Math.floor(rounds / 2)]!;
}

const validate = (schema: StandardSchemaV1, value: unknown) => {
  const result = schema["~standard"].validate(value) as StandardSchemaV1.Result<unknown>;
  if (result.issues) throw new Error("invalid");
  return result.value;
};

console.log(`| route | before: JSON.stringify (no shaping) | validate + JSON.stringify | JSON Schema strip + JSON.stringify | fast-json-stringify (production) | validate + fast-json-stringify (development) |`);
console.log(`| --- | --- | --- | --- | --- | --- |`);
for (const { name, schema, value } of ROUTES) {
  const { $schema: _, ...json } = readJSONSchema(schema, "output")!;
  const fjs = fastJSONStringify(json as never) as (value: unknown) => string;
  const strip = compileStrip(json);
  if (fjs(value) !== JSON.stringify(strip(value)) || JSON.stringify(validate(schema, value)) !== fjs(value)) throw new Error(`${name}: the ways disagree`);
  // Each text is encoded to bytes, as the server does before writing it: a string built by
  // concatenation (fast-json-stringify's) is flattened there, which JSON.stringify's never needs.
  const cells = [
    measure(() => Buffer.from(JSON.stringify(value))),
    measure(() => Buffer.from(JSON.stringify(validate(schema, value)))),
    measure(() => Buffer.from(JSON.stringify(strip(value)))),
    measure(() => Buffer.from(fjs(value))),
    measure(() => (validate(schema, value), Buffer.from(fjs(value)))),
  ];
  console.log(`| ${name} | ${cells.map((ns) => `${(ns / 1000).toFixed(2)} µs`).join(" | ")} |`);
}
