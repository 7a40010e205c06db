/**
 * HTTP methods known to the OpenTelemetry HTTP semantic conventions (RFC 9110, PATCH from
 * RFC 5789, and QUERY). Anything else is reported as `_OTHER`, so a client inventing methods
 * cannot create metric series or span names at will.
 */
export const KNOWN_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "QUERY"] as const;

/** The value that stands for every method outside `KNOWN_METHODS`. */
export const OTHER_METHOD = "_OTHER";

const INDEX = new Map<string, number>(KNOWN_METHODS.map((method, index) => [method, index]));

/** Index into `METHOD_LABELS`: a known method's position, or the last slot for `_OTHER`. */
export function getMethodIndex(method: string): number {
  return INDEX.get(method) ?? KNOWN_METHODS.length;
}

/** Label values by index: the known methods, then `_OTHER`. */
export const METHOD_LABELS: readonly string[] = [...KNOWN_METHODS, OTHER_METHOD];

/** The method as a label: itself when known (case-sensitive, as HTTP methods are), else `_OTHER`. */
export function normalizeMethod(method: string): string {
  return INDEX.has(method) ? method : OTHER_METHOD;
}
