import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { errorMessage } from "../src/errors.js";

export const NEW_USAGE = `Usage: keelson new <dir> [--name NAME] [--keelson PATH]

Writes a ready keelson project into <dir> (which must not exist or be empty): package.json,
tsconfig.json, src/ (an App with validated routes on a SQLite database every worker shares), a
vitest test using app.request(), a Dockerfile, a Makefile (make test, make run WORKERS=N) that
installs keelson's pinned Node (.node-version) when the system's is another major. Then:
  cd <dir> && make test && make run WORKERS=2

Options:
      --name NAME      package and service name (default: the directory's name)
      --keelson PATH   take keelson from a tarball (npm pack of a checkout) or a checkout's
                       folder instead of the registry: written as a file: dependency
  -h, --help           this text`;

/** npm's rule for a new package name, lower case: what `npm init` accepts. */
const PACKAGE_NAME = /^(@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;

/** Template files whose name npm would drop or act on when packing keelson: renamed when written. */
const DOTFILES: Record<string, string> = { gitignore: ".gitignore", dockerignore: ".dockerignore" };

/** The package root of this file: `supervisor/` from the sources, `dist/supervisor/` once built. */
function packageRoot(): string {
  for (let dir = import.meta.dirname; dir !== dirname(dir); dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json")) && existsSync(join(dir, "templates", "new"))) return dir;
  }
  throw new Error("keelson's templates/new folder is missing from the installed package");
}

interface KeelsonManifest {
  version: string;
  engines: { node: string };
  devDependencies?: Record<string, string>;
}

/**
 * The new project's package.json: keelson at this version (or `keelsonSpec`, a file: dependency), the
 * tools at the versions keelson itself is tested with.
 */
function manifest(name: string, keelson: KeelsonManifest, keelsonSpec?: string): string {
  const tested = keelson.devDependencies ?? {};
  const pin = (pkg: string, fallback: string) => tested[pkg] ?? fallback;
  return JSON.stringify({
    name,
    version: "0.1.0",
    private: true,
    type: "module",
    // The Node keelson needs: an older one installs the project and then fails at the first import.
    engines: { node: keelson.engines.node },
    scripts: {
      build: "tsc -p tsconfig.json", bundle: "keelson bundle dist/main.js", start: "keelson start dist/main.js",
      test: "tsc --noEmit -p tsconfig.json && vitest run",
    },
    dependencies: { keelson: keelsonSpec ?? `^${keelson.version}`, zod: pin("zod", "^4") },
    devDependencies: {
      "@types/node": pin("@types/node", "^20.19.0"), esbuild: pin("esbuild", ">=0.25.0"), tsx: pin("tsx", "^4"), typescript: pin("typescript", "~5.9.3"),
      vitest: pin("vitest", "^4"),
    },
  }, null, 2) + "\n";
}

function listTemplates(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .toSorted();
}

/** keelson's own files a new project gets as they are: the pinned Node and the script its Makefile installs it with. */
const COPIED: Record<string, number> = { ".node-version": 0o644, "scripts/ensure-node.sh": 0o755 };

/**
 * `--keelson PATH` as a dependency of a project in `dir`: a file: spec, absolute when PATH is, else
 * relative to the project. Refuses a path that is neither a tarball nor a folder holding keelson's
 * package.json.
 */
export function keelsonFileSpec(path: string, dir: string): string {
  const absolute = resolve(path);
  if (!existsSync(absolute)) throw new Error(`--keelson: ${absolute} does not exist (a tarball from npm pack, or a keelson checkout)`);
  if (statSync(absolute).isDirectory()) {
    const manifestFile = join(absolute, "package.json");
    const packageName = existsSync(manifestFile) ? (JSON.parse(readFileSync(manifestFile, "utf8")) as { name?: string }).name : undefined;
    if (packageName !== "keelson") throw new Error(`--keelson: ${absolute} is not a keelson checkout (its package.json is not keelson's)`);
  } else if (!absolute.endsWith(".tgz")) {
    throw new Error(`--keelson: ${absolute} is neither a folder nor a .tgz tarball`);
  }
  return `file:${isAbsolute(path) ? absolute : relative(dir, absolute) || "."}`;
}

/**
 * Writes the project; returns the files written, relative to `dir`. `keelson` is the dependency's
 * spec when it is not this version from the registry (see keelsonFileSpec).
 *
 * @example
 * writeProject("my-api", { name: "my-api" }); // then: cd my-api && make test
 * writeProject("my-api", { name: "my-api", keelson: keelsonFileSpec("keelson-0.1.0.tgz", "my-api") });
 */
export function writeProject(dir: string, { name, keelson: keelsonSpec }: { name: string; keelson?: string }): string[] {
  const root = packageRoot();
  const templates = join(root, "templates", "new");
  const keelson = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as KeelsonManifest;
  const written: string[] = [];
  const write = (file: string, text: string, mode = 0o644) => {
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    writeFileSync(join(dir, file), text, { flag: "wx", mode });
    written.push(file);
  };
  write("package.json", manifest(name, keelson, keelsonSpec));
  for (const file of listTemplates(templates)) {
    write(DOTFILES[file] ?? file, readFileSync(join(templates, file), "utf8").replaceAll("{{name}}", name));
  }
  for (const [file, mode] of Object.entries(COPIED)) write(file, readFileSync(join(root, file), "utf8"), mode);
  return written;
}

/** `keelson new <dir>`: resolves to the exit code (0 written, 1 failed, 2 usage error). */
export async function runNewCommand(argv: readonly string[]): Promise<number> {
  let target: string;
  let name: string;
  let keelson: string | undefined;
  try {
    const { values, positionals } = parseArgs({
      args: [...argv], allowPositionals: true, strict: true,
      options: { name: { type: "string" }, keelson: { type: "string" }, help: { type: "boolean", short: "h" } },
    });
    if (values.help === true) {
      process.stdout.write(NEW_USAGE + "\n");
      return 0;
    }
    if (positionals.length !== 1) throw new Error(positionals.length === 0 ? "missing <dir>" : `one <dir> only, got ${positionals.join(" ")}`);
    target = resolve(positionals[0]!);
    name = values.name ?? basename(target);
    if (!PACKAGE_NAME.test(name)) throw new Error(`"${name}" is not a valid npm package name (lower case, digits, - . _ ~): use --name`);
    if (existsSync(target) && readdirSync(target).length > 0) throw new Error(`${target} exists and is not empty`);
    if (values.keelson !== undefined) keelson = keelsonFileSpec(values.keelson, target);
  } catch (error) {
    process.stderr.write(`keelson new: ${errorMessage(error)}\nRun "keelson new --help" for usage.\n`);
    return 2;
  }
  try {
    const files = writeProject(target, { name, ...(keelson === undefined ? {} : { keelson }) });
    const shown = relative(process.cwd(), target) || ".";
    process.stdout.write(`keelson new: wrote ${files.length} files into ${shown}\n\n  cd ${shown}\n  make test\n  make run WORKERS=2\n`);
    return 0;
  } catch (error) {
    process.stderr.write(`keelson new: ${errorMessage(error)}\n`);
    return 1;
  }
}
