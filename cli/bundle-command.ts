import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import type { BuildOptions, Plugin } from "esbuild";
import { basename, dirname, extname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { scalarBundleCandidates } from "../src/docs/assets.js";
import { errorMessage } from "../src/errors.js";

export const BUNDLE_USAGE = `Usage: keelson bundle <entry> [--out DIR] [--external PKG]...

Bundles the service for production: <entry> (the built worker entry, e.g. dist/main.js), keelson's
supervisor CLI and its worker preload into DIR as ES modules sharing their common code, with the
docs page's Scalar bundle beside them. Start it as you would the unbundled service:
  node DIR/keelson.mjs start DIR/<entry name>.mjs [--workers N]
One file per entry instead of hundreds of modules: the start-up skips Node's module resolution.

Options:
      --out DIR        where to write (default: dist/bundle); emptied first, so it must be empty
                       or an earlier bundle
      --external PKG   leave PKG to node_modules at run time (repeatable): for packages that read
                       files next to their own code or load native addons
  -h, --help           this text

Needs esbuild (npm install --save-dev esbuild). Source maps are written beside each file:
NODE_OPTIONS=--enable-source-maps maps stack traces back to your sources.`;

/** The package of a bare specifier or of a path below node_modules (`@scope/name` or `name`). */
function packageName(specifier: string): string {
  const parts = specifier.split(/[\\/]/);
  return parts[0]?.startsWith("@") ? `${parts[0]}/${parts[1] ?? ""}` : (parts[0] ?? "");
}

/** The package a bundled file belongs to, or undefined for the project's own files. */
function packageOf(path: string): string | undefined {
  const rest = path.split(/[\\/]node_modules[\\/]|^node_modules[\\/]/).at(-1);
  return rest === undefined || rest === path ? undefined : packageName(rest);
}

/**
 * A package the code loads with `import()` stays an import from node_modules: it is off the start-up
 * path anyway, keeps Node's own semantics (esbuild gives a dynamically imported CommonJS package only
 * a default export once code is split), and optional ones (postgres, openapi-typescript) need not be
 * installed to bundle. `everywhere`: packages also imported statically, external in every import so
 * that there is one copy of their module state, not one bundled and one from node_modules.
 */
function keepPackagesExternal(everywhere: ReadonlySet<string>, dynamic: Set<string>): Plugin {
  return {
    name: "keelson-external-packages",
    setup(build) {
      build.onResolve({ filter: /^[^./#]/ }, (args) => {
        if (args.path.startsWith("node:")) return undefined;
        const name = packageName(args.path);
        if (args.kind === "dynamic-import") dynamic.add(name);
        return args.kind === "dynamic-import" || everywhere.has(name) ? { path: args.path, external: true } : undefined;
      });
    },
  };
}

/** What `keelson bundle …` asks for. */
export type BundleRequest =
  | { command: "help" }
  | { command: "error"; message: string }
  | { command: "bundle"; entry: string; out: string; external: string[] };

/** Parses the arguments after `bundle`. Never throws. */
export function parseBundleArgs(argv: readonly string[]): BundleRequest {
  try {
    const { values, positionals } = parseArgs({
      args: [...argv], allowPositionals: true, strict: true,
      options: { out: { type: "string" }, external: { type: "string", multiple: true }, help: { type: "boolean", short: "h" } },
    });
    if (values.help === true) return { command: "help" };
    const [entry, ...extra] = positionals;
    if (entry === undefined) return { command: "error", message: "missing <entry> (the built module that builds the App and listens)" };
    if (extra.length > 0) return { command: "error", message: `unexpected argument(s): ${extra.join(" ")}` };
    if (!existsSync(entry)) return { command: "error", message: `${entry} does not exist (build the service first)` };
    const name = entryName(entry);
    if (name === "keelson" || name === "worker-preload") return { command: "error", message: `an entry named "${name}" would overwrite keelson's own file in the bundle: rename it` };
    return { command: "bundle", entry: resolve(entry), out: resolve(values.out ?? join("dist", "bundle")), external: values.external ?? [] };
  } catch (error) {
    return { command: "error", message: errorMessage(error) };
  }
}

const entryName = (entry: string): string => basename(entry, extname(entry));

/** The CLI and the preload next to this module: `.js` once built, `.ts` from the sources. */
function ownEntry(path: string): string {
  return fileURLToPath(new URL(`${path}${extname(fileURLToPath(import.meta.url))}`, import.meta.url));
}

/**
 * The worker preload of the keelson this command runs from: in the package's build (dist/lib, see
 * scripts/build-package.mjs) it is an entry next to this chunk, in the sources and tsc's output it
 * is in supervisor/. Taking the one of the same build matters: the preload and the App must bundle
 * one copy of the worker link, not two.
 */
function ownPreload(): string {
  const beside = ownEntry("./worker-preload");
  return existsSync(beside) ? beside : ownEntry("../supervisor/worker-preload");
}

/** Refuses to empty a folder that holds anything but an earlier bundle. */
function prepareOut(out: string): void {
  if (existsSync(out)) {
    const files = readdirSync(out);
    if (files.length > 0 && !files.includes("keelson.mjs")) throw new Error(`${out} is neither empty nor an earlier keelson bundle: pick another --out`);
    rmSync(out, { recursive: true, force: true });
  }
  mkdirSync(out, { recursive: true });
}

/** The Scalar bundle where the docs route of a chunk in `out` looks first (`./vendor/`), with its licence notice. */
function copyScalar(out: string): void {
  const source = scalarBundleCandidates().map((url) => fileURLToPath(url)).find((file) => existsSync(file));
  if (source === undefined) throw new Error("Scalar's browser bundle is missing from the installed keelson package");
  mkdirSync(join(out, "vendor"), { recursive: true });
  copyFileSync(source, join(out, "vendor", "scalar-standalone.js"));
  const notice = join(source, "..", "scalar-standalone.LICENSE.txt");
  if (existsSync(notice)) copyFileSync(notice, join(out, "vendor", "scalar-standalone.LICENSE.txt"));
}

/**
 * `keelson bundle`: writes the bundle; resolves to the exit code (0 written, 1 failed, 2 usage error).
 *
 * @example
 * // npx keelson bundle dist/main.js && node dist/bundle/keelson.mjs start dist/bundle/main.mjs
 * process.exitCode = await runBundleCommand(["dist/main.js"]);
 */
export async function runBundleCommand(argv: readonly string[]): Promise<number> {
  const request = parseBundleArgs(argv);
  if (request.command === "help") {
    process.stdout.write(BUNDLE_USAGE + "\n");
    return 0;
  }
  if (request.command === "error") {
    process.stderr.write(`keelson bundle: ${request.message}\nRun "keelson bundle --help" for usage.\n`);
    return 2;
  }
  let esbuild: typeof import("esbuild");
  try {
    esbuild = await import("esbuild");
  } catch {
    process.stderr.write("keelson bundle: esbuild is not installed: npm install --save-dev esbuild\n");
    return 1;
  }
  try {
    const started = performance.now();
    prepareOut(request.out);
    const options = {
      entryPoints: { keelson: ownEntry("./cli"), "worker-preload": ownPreload(), [entryName(request.entry)]: request.entry },
      outdir: request.out, outExtension: { ".js": ".mjs" }, bundle: true, splitting: true, format: "esm", platform: "node",
      target: `node${process.versions.node.split(".")[0]}`, sourcemap: "linked", sourcesContent: false, metafile: true, logLevel: "error",
      // CommonJS dependencies call require() for Node's built-ins; an ES module has no require of its own.
      banner: { js: 'import { createRequire as __keelsonCreateRequire } from "node:module"; const require = __keelsonCreateRequire(import.meta.url);' },
      external: request.external, write: false,
    } satisfies BuildOptions;
    const dynamic = new Set<string>();
    let result = await esbuild.build({ ...options, plugins: [keepPackagesExternal(new Set(), dynamic)] });
    const bundled = new Set(Object.keys(result.metafile.inputs).map(packageOf));
    const both = new Set([...dynamic].filter((name) => bundled.has(name)));
    if (both.size > 0) result = await esbuild.build({ ...options, plugins: [keepPackagesExternal(both, new Set())] });
    for (const file of result.outputFiles) {
      mkdirSync(dirname(file.path), { recursive: true });
      writeFileSync(file.path, file.contents);
    }
    copyScalar(request.out);
    const outputs = result.outputFiles.filter((file) => file.path.endsWith(".mjs"));
    const bytes = outputs.reduce((sum, file) => sum + file.contents.byteLength, 0);
    const dir = relative(process.cwd(), request.out) || ".";
    process.stdout.write(
      `keelson bundle: ${outputs.length} module(s), ${(bytes / 1e6).toFixed(1)} MB → ${dir} in ${Math.round(performance.now() - started)} ms\n` +
      (both.size > 0 ? `loaded from node_modules, being imported with import() too: ${[...both].join(", ")}\n` : "") +
      `start it: node ${join(dir, "keelson.mjs")} start ${join(dir, `${entryName(request.entry)}.mjs`)}\n`,
    );
    return 0;
  } catch (error) {
    process.stderr.write(`keelson bundle: ${errorMessage(error)}\n`);
    return 1;
  }
}
