// Its own module so config resolution and the docs can join paths without importing the App.

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
