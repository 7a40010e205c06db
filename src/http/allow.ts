import { addRoute, createRouter, findRoute, type RouterContext } from "rou3";

/** Methods a 405's `Allow` header can name: those a keelson route can have, plus HEAD (answered by GET routes). */
const ALLOW_CANDIDATES = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] as const;

/** A rou3 router of keelson's own routes, used only to answer "which methods exist for this path". */
export type AllowRouter = RouterContext<true>;

/**
 * Builds the router from keelson's route list. h3 keeps its own router private (`~rou3`), so
 * keelson indexes the same paths again with the same rou3; this runs once routes are fixed, not
 * per request.
 */
export function buildAllowRouter(routes: Iterable<{ readonly method: string; readonly path: string }>): AllowRouter {
  const router = createRouter<true>();
  for (const { method, path } of routes) addRoute(router, method, path, true);
  return router;
}

/** The methods with a route for `path`, in `Allow` order; empty when no route has this path. */
export function allowedMethods(router: AllowRouter, path: string): string[] {
  return ALLOW_CANDIDATES.filter((method) => findRoute(router, method, path) !== undefined
    || (method === "HEAD" && findRoute(router, "GET", path) !== undefined));
}
