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

/** A security scheme of `components.securitySchemes` (the OpenAPI 3.1 shapes). */
export type OpenAPISecurityScheme =
  | { type: "http"; scheme: string; bearerFormat?: string; description?: string }
  | { type: "apiKey"; name: string; in: "query" | "header" | "cookie"; description?: string }
  | { type: "oauth2"; flows: Record<string, unknown>; description?: string }
  | { type: "openIdConnect"; openIdConnectUrl: string; description?: string }
  | { type: "mutualTLS"; description?: string };

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
