// `keelson new --keelson PATH`: where the project takes keelson from before it is on the registry.
// The whole flow (npm pack, keelson new --keelson, the project's make test): test/tooling/new-project.test.ts.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { keelsonFileSpec, writeProject } from "../cli/new-command.js";

const ROOT = resolve(import.meta.dirname, "..");
const work = mkdtempSync(join(tmpdir(), "keelson-spec-"));
const tarball = join(work, "keelson", "keelson-0.1.0.tgz");
mkdirSync(join(work, "keelson"));
writeFileSync(tarball, "");

afterAll(() => rmSync(work, { recursive: true, force: true }));

/** The keelson dependency of the project in `dir`. */
const dependency = (dir: string) => (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { dependencies: { keelson: string } }).dependencies.keelson;

describe("keelson new --keelson", () => {
  it("writes a relative path relative to the project, as the docs show (file:../keelson/keelson-0.1.0.tgz)", () => {
    const project = join(work, "my-api");
    expect(keelsonFileSpec(relative(process.cwd(), tarball), project)).toBe("file:../keelson/keelson-0.1.0.tgz");
  });

  it("keeps an absolute path absolute, and takes a checkout's folder", () => {
    expect(keelsonFileSpec(tarball, join(work, "my-api"))).toBe(`file:${tarball}`);
    expect(keelsonFileSpec(ROOT, join(work, "my-api"))).toBe(`file:${ROOT}`);
  });

  it("refuses what is not keelson, naming the option", () => {
    expect(() => keelsonFileSpec(join(work, "missing.tgz"), work)).toThrow(/^--keelson: .* does not exist/);
    expect(() => keelsonFileSpec(join(ROOT, "src"), work)).toThrow(/^--keelson: .* is not a keelson checkout/);
    expect(() => keelsonFileSpec(join(ROOT, "package.json"), work)).toThrow(/^--keelson: .* is neither a folder nor a \.tgz tarball/);
  });

  it("is the project's keelson dependency; without it, this version from the registry", () => {
    const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
    writeProject(join(work, "with"), { name: "with", keelson: "file:../keelson/keelson-0.1.0.tgz" });
    writeProject(join(work, "without"), { name: "without" });
    expect([dependency(join(work, "with")), dependency(join(work, "without"))]).toEqual(["file:../keelson/keelson-0.1.0.tgz", `^${version}`]);
  });
});
