/**
 * A real Node 20 binary, older than engines.node, for the tests of what an unsupported Node meets: the
 * registry's node-linux-<arch>@20 package (`npm pack`), unpacked once into .cache/test-node/.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, realpathSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

const CACHE = join(resolve(import.meta.dirname, ".."), ".cache", "test-node");

/**
 * The path of the Node 20 binary (`…/bin/node`), downloaded on the first call of the machine. Real
 * (symbolic links resolved): what the binary reports as its `process.execPath`.
 */
export function node20(): string {
  const found = existsSync(CACHE) ? readdirSync(CACHE).find((name) => /^v20\.\d+\.\d+$/.test(name)) : undefined;
  if (found !== undefined) return realpathSync(join(CACHE, found, "bin", "node"));
  mkdirSync(CACHE, { recursive: true });
  const pack = spawnSync("npm", ["pack", `node-linux-${process.arch}@20`, "--json", "--pack-destination", CACHE], { encoding: "utf8", timeout: 300_000 });
  if (pack.status !== 0) throw new Error(`npm pack node-linux-${process.arch}@20 failed: ${pack.stderr}`);
  const [{ filename, version }] = JSON.parse(pack.stdout) as [{ filename: string; version: string }];
  const unpacked = join(CACHE, `unpacking-${process.pid}`);
  mkdirSync(unpacked, { recursive: true });
  const tar = spawnSync("tar", ["-xzf", join(CACHE, filename), "-C", unpacked, "package/bin/node"], { encoding: "utf8" });
  if (tar.status !== 0) throw new Error(`unpacking ${filename} failed: ${tar.stderr}`);
  // Renamed into place whole, so a run killed halfway never leaves a broken cached binary.
  renameSync(join(unpacked, "package"), join(CACHE, `v${version}`));
  rmSync(unpacked, { recursive: true, force: true });
  rmSync(join(CACHE, filename), { force: true });
  return realpathSync(join(CACHE, `v${version}`, "bin", "node"));
}
