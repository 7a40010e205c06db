import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** A package loaded when first used; `check()` makes sure, without loading it, that it can be. */
export interface LazyPackage<T> {
  /** Loads the package (once) and returns its exports. */
  (): T;
  /** Throws, naming `who` and the package, when it cannot be found from keelson's code. */
  check(who: string): void;
}

/**
 * A package keelson loads at first use, not at import (prom-client, fast-json-stringify, the
 * OpenTelemetry API, croner): start-up does not pay for what a process may never need. Code that will need
 * it calls `check()` when it is set up, so a package missing at run time (a bundle shipped without
 * `node_modules`) fails the start with its name instead of a worker after its first request.
 */
export function lazyPackage<T>(name: string): LazyPackage<T> {
  let loaded: T | undefined;
  let found = false;
  const load = (() => (loaded ??= require(name) as T)) as LazyPackage<T>;
  load.check = (who) => {
    if (found || loaded !== undefined) return;
    try {
      require.resolve(name);
      found = true;
    } catch (error) {
      throw new Error(
        `${who} needs the package ${name}, which cannot be found from ${import.meta.url}: install it, or ship node_modules ` +
        "next to a bundle (docs/deployment.md)",
        { cause: error },
      );
    }
  };
  return load;
}

/** A package loaded by `import()` when first used: see lazyImport. */
export type LazyImport<T> = (who?: string) => Promise<T>;

/**
 * An optional package keelson loads with `import()` at first use (busboy, crossws, postgres,
 * redis): an ES module, or one a bundler must see (`import("busboy")` written in `load`, so
 * `keelson bundle` still carries it). The load is shared by every caller and tried again after a
 * failure. `who` names what needed it: a package that cannot be loaded then fails with
 * `<who> needs the \`<name>\` package: npm install <name>`, the original error as its cause.
 *
 * @example
 * const loadPostgres = lazyImport("postgres", async () => ((await import("postgres")) as { default: Postgres }).default);
 * const postgres = await loadPostgres("openPostgres()");
 */
export function lazyImport<T>(name: string, load: () => Promise<T>): LazyImport<T> {
  let loading: Promise<T> | undefined;
  return (who) => {
    loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw error;
    });
    return who === undefined ? loading : loading.catch((error: unknown) => {
      throw new Error(`${who} needs the \`${name}\` package: npm install ${name}`, { cause: error });
    });
  };
}
