import type { StandardSchemaV1 } from "@standard-schema/spec";
import { readJSONSchema } from "./json-schema.js";
import type { ResponseDoc, Route } from "./route.js";
import { lazyPackage } from "../lazy-package.js";
import { errorMessage } from "../errors.js";

type FastJSONStringify = (typeof import("fast-json-stringify"))["default"];

// fast-json-stringify and its ajv are ~75 modules: loaded by the first response that compiles a
// schema, not by every App at start-up (an App without response schemas never loads them).
const loadFastJSONStringify = lazyPackage<FastJSONStringify>("fast-json-stringify");

/** Writes a value as the JSON text of one response status; a promise only for async schemas. */
export type ResponseSerializer = (value: unknown) => string | Promise<string>;

/** What a route's declared response schemas do: the serializer of each status that has one. */
export type ResponseSerializers = (status: number) => ResponseSerializer | undefined;

/**
 * A handler's value that does not fit the route's response schema: a bug in the route, answered
 * as a 500 (the body never carries this message; the error line names route, status and field).
 */
export class ResponseContractError extends Error {
  constructor(where: string, detail: string) {
    super(`response of ${where} does not match its schema: ${detail}`);
    this.name = "ResponseContractError";
  }
}

/** The schema that writes a status's JSON body; none for a body of another media type (`contentType`). */
function schemaOf(doc: StandardSchemaV1 | ResponseDoc): StandardSchemaV1 | undefined {
  if ("~standard" in doc) return doc;
  return doc.contentType === undefined ? doc.schema : undefined;
}

function describeIssues(issues: readonly StandardSchemaV1.Issue[]): string {
  return issues.slice(0, 3).map((issue) => {
    const path = (issue.path ?? []).map((key) => String(typeof key === "object" ? key.key : key)).join(".");
    return `${path === "" ? "(root)" : path}: ${issue.message}`;
  }).join("; ");
}

/**
 * The compiled serializer of the schema's output side, or undefined when the schema has no JSON
 * Schema or fast-json-stringify cannot compile it. It writes only the declared properties, and
 * throws on a missing required property or a value it cannot write as the declared type.
 */
function compile(schema: StandardSchemaV1): ((value: unknown) => string) | undefined {
  const json = readJSONSchema(schema, "output");
  if (json === undefined) return undefined;
  const { $schema: _dialect, ...root } = json;
  const build = loadFastJSONStringify();
  try {
    return build(root as unknown as Parameters<FastJSONStringify>[0]) as (value: unknown) => string;
  } catch {
    return undefined;
  }
}

/**
 * One status's serializer, compiled on its first response (fast-json-stringify takes about a
 * millisecond a schema, which start-up need not pay for routes not yet called). `check` also runs
 * the schema's own validation first (every constraint, with the failing field's path); without
 * a JSON Schema the validation's output (which drops undeclared keys in zod, valibot, arktype)
 * is what is sent, checked or not.
 */
function serializerFor(schema: StandardSchemaV1, where: string, check: boolean): ResponseSerializer {
  let write: ((value: unknown) => string) | null | undefined;
  const validated = (value: unknown, then: (output: unknown) => string): string | Promise<string> => {
    const settle = (result: StandardSchemaV1.Result<unknown>) => {
      if (result.issues) throw new ResponseContractError(where, describeIssues(result.issues));
      return then(result.value);
    };
    const result = schema["~standard"].validate(value);
    return result instanceof Promise ? result.then(settle) : settle(result);
  };
  const serialize = (value: unknown): string => {
    try {
      return write!(value);
    } catch (error) {
      throw new ResponseContractError(where, errorMessage(error));
    }
  };
  return function writeResponse(value) {
    if (write === undefined) write = compile(schema) ?? null;
    if (write === null) return validated(value, (output) => JSON.stringify(output));
    return check ? validated(value, () => serialize(value)) : serialize(value);
  };
}

/**
 * The serializers of a route's declared response schemas, by status; undefined when it declares
 * none (its responses are written as before: JSON.stringify of whatever the handler returns).
 */
export function responseSerializers(route: Route, path: string, check: boolean): ResponseSerializers | undefined {
  const byStatus = new Map<number, ResponseSerializer>();
  for (const [key, doc] of Object.entries(route.options.responses ?? {})) {
    const schema = schemaOf(doc);
    const status = Number(key);
    // Error statuses keep keelson's KError body whatever is declared for them.
    if (schema !== undefined && status < 400) byStatus.set(status, serializerFor(schema, `${route.method} ${path} (${status})`, check));
  }
  if (byStatus.size === 0) return undefined;
  loadFastJSONStringify.check(`${route.method} ${path}'s response schemas`);
  return (status) => byStatus.get(status);
}
