// Its own module so the docs can join paths without importing group.ts, which names the App.

/**
 * Joins path prefixes: no double slashes, no trailing slash (except for `/` itself).
 *
 * @example
 * joinPath("/api/", "/books/") // "/api/books"
 */
export function joinPath(prefix: string, path: string): string {
  const joined = `/${prefix}/${path}`.replace(/\/{2,}/g, "/");
  return joined.length > 1 && joined.endsWith("/") ? joined.slice(0, -1) : joined;
}
