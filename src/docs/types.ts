import type { OpenAPISecurityScheme } from "../http/middleware-contract.js";

/** A JSON Schema (2020-12) object inside the document. */
export type OpenAPISchema = { [key: string]: unknown };

export interface OpenAPIParameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required: boolean;
  description?: string;
  deprecated?: boolean;
  schema: OpenAPISchema;
}

export interface OpenAPIMediaType {
  schema?: OpenAPISchema;
  example?: unknown;
}

export interface OpenAPIResponse {
  description: string;
  headers?: Record<string, { description: string; schema: Record<string, unknown> }>;
  content?: Record<string, OpenAPIMediaType>;
}

/** A `$ref` to a shared entry of `components`. */
export interface OpenAPIRef {
  $ref: string;
}

export interface OpenAPIOperation {
  operationId: string;
  summary?: string;
  description?: string;
  tags?: string[];
  deprecated?: boolean;
  parameters?: OpenAPIParameter[];
  requestBody?: { required: boolean; description?: string; content: Record<string, OpenAPIMediaType> };
  responses: Record<string, OpenAPIResponse | OpenAPIRef>;
  security?: Record<string, string[]>[];
}

/** OpenAPI 3.1 methods of a path item. */
export type OpenAPIMethod = "get" | "put" | "post" | "delete" | "options" | "head" | "patch" | "trace";

export type OpenAPIPathItem = Partial<Record<OpenAPIMethod, OpenAPIOperation>>;

/** The OpenAPI 3.1 document keelson serves at `{docs.path}/openapi.json`. */
export interface OpenAPIDocument {
  openapi: "3.1.0";
  info: {
    title: string;
    version: string;
    description?: string;
    contact?: { name?: string; url?: string; email?: string };
    license?: { name: string; url?: string };
  };
  servers?: { url: string; description?: string }[];
  tags?: { name: string; description?: string }[];
  paths: Record<string, OpenAPIPathItem>;
  components: {
    schemas: Record<string, OpenAPISchema>;
    responses?: Record<string, OpenAPIResponse>;
    securitySchemes?: Record<string, OpenAPISecurityScheme>;
  };
}

export interface DocsContact {
  name?: string;
  url?: string;
  email?: string;
}

export interface DocsLicense {
  name: string;
  url?: string;
}

export interface DocsTag {
  name: string;
  description?: string;
}

/** Settings of the generated OpenAPI document and the docs page. */
export interface DocsConfig {
  /** Path of the docs page; the document is served at `{path}/openapi.json`. Default `/docs`. */
  path?: string;
  title?: string;
  /** Version of the documented API. Default `1.0.0`. */
  version?: string;
  description?: string;
  contact?: DocsContact;
  license?: DocsLicense;
  /** Each item is `"<url> - <description>"` (the description part is optional). */
  servers?: string[];
  tags?: DocsTag[];
  /**
   * `components.securitySchemes` of the document, by the names routes use in `security` /
   * `.secured()`. Undeclared names used by routes: `bearer` and `basic` are HTTP schemes,
   * any other name is documented as a bearer token.
   */
  securitySchemes?: Record<string, OpenAPISecurityScheme>;
}
