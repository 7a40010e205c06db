import { constants, enableCompileCache } from "node:module";
import { join } from "node:path";
import { errorMessage } from "../src/errors.js";

/** What {@link prepareRuntime} did; `warnings` are for the supervisor's log once it has one. */
export interface RuntimeSetup {
  /** The `.env` file loaded, if there was one. */
  envFile: string | undefined;
  /** The compile cache's folder when it is on (for this process and every worker), else undefined. */
  compileCache: string | undefined;
  warnings: string[];
}

/**
 * Sets up the CLI's process before anything else is loaded:
 *
 * - an optional `.env` in the working directory is loaded (`process.loadEnvFile`); a variable already
 *   in the environment wins over the file, so `PORT=4000 keelson start …` still means 4000.
 * - V8's on-disk compile cache is turned on (`module.enableCompileCache()`): the folder is
 *   `NODE_COMPILE_CACHE` when set, else `<os.tmpdir()>/node-compile-cache`; `NODE_DISABLE_COMPILE_CACHE=1`
 *   turns it off. Workers inherit `NODE_COMPILE_CACHE`, so Node enables it for them before their
 *   first module loads. A folder that cannot be created is reported as a warning, not an error:
 *   the cache only saves start-up time.
 *
 * Throws when `.env` exists but cannot be read or parsed (configuration silently ignored is worse).
 *
 * @example
 * const runtime = prepareRuntime();
 * const { Supervisor } = await import("../supervisor/primary.js"); // compiled through the cache
 */
export function prepareRuntime(cwd: string = process.cwd()): RuntimeSetup {
  const warnings: string[] = [];
  const envFile = loadDotEnv(join(cwd, ".env"));
  // The folder is passed explicitly: with no argument, Node 22 falls back to the temp folder when
  // NODE_COMPILE_CACHE is unusable, while the workers would inherit the unusable one.
  const cache = enableCompileCache(process.env.NODE_COMPILE_CACHE || undefined);
  let compileCache: string | undefined;
  if (cache.status === constants.compileCacheStatus.ENABLED || cache.status === constants.compileCacheStatus.ALREADY_ENABLED) {
    // ALREADY_ENABLED means NODE_COMPILE_CACHE was set: the workers inherit it as it is.
    process.env.NODE_COMPILE_CACHE ??= cache.directory;
    compileCache = process.env.NODE_COMPILE_CACHE;
  } else if (cache.status === constants.compileCacheStatus.FAILED) {
    warnings.push(`compile cache off (set NODE_COMPILE_CACHE to a writable folder): ${cache.message ?? "unknown error"}`);
  }
  return { envFile, compileCache, warnings };
}

function loadDotEnv(path: string): string | undefined {
  try {
    process.loadEnvFile(path);
    return path;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`cannot load ${path}: ${errorMessage(error)}`, { cause: error });
  }
}
