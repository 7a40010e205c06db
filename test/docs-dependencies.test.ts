// Getting started lists what a user's install brings along: every runtime dependency of the package.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = resolve(import.meta.dirname, "..");

describe("docs/getting-started.md", () => {
  it("names every runtime dependency of package.json", () => {
    const { dependencies } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    const page = readFileSync(join(ROOT, "docs", "getting-started.md"), "utf8");
    const paragraph = page.slice(page.indexOf("Its runtime dependencies"), page.indexOf("nothing is fetched at run time"));
    const named = (name: string) => paragraph.includes(`\`${name}\``) || new RegExp(`\\b${name.replace(/[/@.]/g, "\\$&")}\\b`).test(paragraph);
    expect(Object.keys(dependencies).filter((name) => !named(name))).toEqual([]);
  });
});
