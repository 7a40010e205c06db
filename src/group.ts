import type { Middleware } from "h3";
import type { App } from "./app.js";
import { joinPath } from "./http/path.js";
import type { Controller, Route } from "./http/route.js";

export { joinPath } from "./http/path.js";

/** What both an App and a Group can register routes on. */
export interface Router {
  /** The App this router belongs to (itself for an App). */
  readonly app: App;
  route(route: Route): this;
  registerController(controller: Controller): this;
  use(module: Module): this;
  group(prefix: string, ...middleware: Middleware[]): Group;
}

/** A unit of features installed with `use()` (a module: docs/routing.md). */
export interface Module {
  /** Optional name, used in startup error messages. */
  readonly name?: string;
  /** Receives the App (or the Group it is installed on) and registers what it needs. */
  register(router: Router): void | Promise<void>;
}


/**
 * Routes under a common prefix and middleware. Groups nest: the prefixes join and group
 * middleware runs outermost first, then the route's own middleware.
 */
export class Group implements Router {
  readonly app: App;
  readonly prefix: string;
  readonly middleware: readonly Middleware[];

  constructor(app: App, prefix: string, middleware: readonly Middleware[]) {
    this.app = app;
    this.prefix = joinPath(prefix, "");
    this.middleware = middleware;
  }

  route(route: Route): this {
    this.app.addRoute(route, this.prefix, this.middleware);
    return this;
  }

  registerController(controller: Controller): this {
    for (const route of controller.routes()) this.route(route);
    return this;
  }

  use(module: Module): this {
    this.app.installModule(module, this);
    return this;
  }

  group(prefix: string, ...middleware: Middleware[]): Group {
    return new Group(this.app, joinPath(this.prefix, prefix), [...this.middleware, ...middleware]);
  }
}
