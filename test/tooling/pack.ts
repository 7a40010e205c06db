/**
 * The keelson package as a user gets it, for the tests that install it: `npm pack` of a fresh copy
 * of the repository (its prepack builds), and commands run to their end.
 */
import { readFileSync, readdirSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";
import { spawnChild } from "../../harness/child.js";

export const ROOT = resolve(import.meta.dirname, "..", "..");

/** Runs a command to its end; rejects with its output when it fails. */
export async function run(command: string, args: string[], cwd: string, env: Record<string, string | undefined> = {}): Promise<string> {
  const child = spawnChild([command, ...args], { cwd, env: { npm_config_update_notifier: "false", ...env } });
  const { code } = await child.exited;
  if (code !== 0) throw new Error(`${command} ${args.join(" ")} exited ${code}:\n${child.output()}`);
  return child.output();
}

/** npm without the audit, the funding notice, or a registry round trip for what the cache holds. */
export const npm = (args: string[], cwd: string): Promise<string> => run("npm", [...args, "--no-audit", "--no-fund", "--prefer-offline"], cwd);

/**
 * Packs keelson into `work`: a fresh clone (the tracked sources without dist/ or node_modules/;
 * node_modules is linked, not installed) whose prepack builds. Resolves to the tarball's path.
 */
export async function packKeelson(work: string): Promise<string> {
  const repo = join(work, "repo");
  await run("sh", ["-c", `mkdir -p "${repo}" && tar --exclude=./node_modules --exclude=./dist --exclude=./.git -cf - . | tar -xf - -C "${repo}"`], ROOT);
  symlinkSync(join(ROOT, "node_modules"), join(repo, "node_modules"), "dir");
  await npm(["pack", "--pack-destination", work], repo);
  const packed = readdirSync(work).filter((f) => f.endsWith(".tgz"));
  if (packed.length !== 1) throw new Error(`npm pack wrote ${packed.length} tarballs into ${work}`);
  return join(work, packed[0]!);
}

/** The tsconfig docs/getting-started.md recommends: the first JSON block of its "Add keelson" section. */
export function readRecommendedTsconfig(): { compilerOptions: Record<string, unknown> } {
  const page = readFileSync(join(ROOT, "docs", "getting-started.md"), "utf8");
  const section = page.slice(page.indexOf("## Add keelson to your own project"));
  const block = /```json\n([\s\S]*?)\n```/.exec(section)?.[1];
  if (block === undefined) throw new Error("docs/getting-started.md: no tsconfig block under \"Add keelson to your own project\"");
  return JSON.parse(block) as { compilerOptions: Record<string, unknown> };
}

/**
 * How many copies of the worker link a `keelson bundle` output holds: 1 when its preload and its App
 * were bundled from the same build of keelson (esbuild renames a second copy `reportWorkerFailure2`).
 */
export function workerLinkCopies(bundleDir: string): number {
  return readdirSync(bundleDir).filter((file) => file.endsWith(".mjs"))
    .flatMap((file) => readFileSync(join(bundleDir, file), "utf8").match(/function reportWorkerFailure\d*\(/g) ?? []).length;
}
