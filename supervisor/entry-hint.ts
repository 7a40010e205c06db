/** A TypeScript source file: what Node cannot load (or resolve the `.js` imports of) without a loader. */
const TYPESCRIPT = /\.[mc]?tsx?$/;
/** What Node says when a TypeScript entry runs without a loader: its `./app.js` import has no file, or `.ts` is unknown. */
const LOAD_ERRORS = /ERR_MODULE_NOT_FOUND|ERR_UNKNOWN_FILE_EXTENSION/;
/** A TypeScript loader given in the Node options: then a module that is not found is really missing. */
const LOADER = /\btsx\b|ts-node|@swc-node|@esbuild-kit|esbuild-register/;

/**
 * The hint for a TypeScript entry that failed to load because no loader is on (`keelson start
 * src/main.ts` without tsx): what to run instead. Undefined when that is not the cause.
 *
 * @example
 * typeScriptEntryHint("start", "src/main.ts", "Error [ERR_MODULE_NOT_FOUND]: Cannot find module '/app/src/app.js'", [])
 * // → 'src/main.ts is TypeScript and no loader is on: run NODE_OPTIONS="--import tsx" keelson start src/main.ts …'
 */
export function typeScriptEntryHint(
  verb: string, entry: string, error: string | undefined, execArgv: readonly string[], nodeOptions: string = process.env.NODE_OPTIONS ?? "",
): string | undefined {
  if (!TYPESCRIPT.test(entry) || error === undefined || !LOAD_ERRORS.test(error)) return undefined;
  if (LOADER.test([...execArgv, nodeOptions].join(" "))) return undefined;
  return `${entry} is TypeScript and no loader is on: run NODE_OPTIONS="--import tsx" keelson ${verb} ${entry} (npm install --save-dev tsx), `
    + `or build first (npx tsc) and give keelson the compiled .js`;
}
