import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FOLDERS, ROOT, findCycles, importGraph, roomGraph, sourcesUnder } from "./helpers/import-graph.js";

// No import cycles in keelson's own code, type-only imports included (docs/architecture.md): a cycle
// makes the order of module evaluation decide whether a value is there yet, and a type-only one still
// ties two rooms together so neither can move or be read alone.
const describeCycle = (cycle: readonly string[]): string => cycle.join(" → ");

describe("the import graph", () => {
  it("finds static, type-only, re-exported and dynamic imports and names each cycle once", () => {
    const sources = new Map([
      ["src/a.ts", `import type { B } from "./b.js";\nimport { x } from "node:fs";\n// import "./c.js"\nexport const s = "import('./c.js')";`],
      ["src/b.ts", `export { c } from "./sub/c.js";`],
      ["src/sub/c.ts", `const a = await import("../a.js");`],
      ["src/d.ts", `import "./e.js";`],
      ["src/e.ts", `type D = typeof import("./d.js");`],
      ["src/f.ts", `import { g } from "./f.js";`],
      ["src/g.ts", `import { a } from "./a.js";\nimport { missing } from "./missing.js";`],
    ]);
    const graph = importGraph(sources);
    expect(graph.get("src/a.ts")).toEqual(["src/b.ts"]);
    expect(graph.get("src/g.ts")).toEqual(["src/a.ts"]);
    expect(findCycles(graph).map(describeCycle)).toEqual([
      "src/a.ts → src/b.ts → src/sub/c.ts → src/a.ts",
      "src/d.ts → src/e.ts → src/d.ts",
      "src/f.ts → src/f.ts",
    ]);
  });

  it("has no cycle in src/, supervisor/ and cli/", () => {
    const files = FOLDERS.flatMap(sourcesUnder);
    const graph = importGraph(new Map(files.map((file) => [file, readFileSync(join(ROOT, file), "utf8")])));
    // Guards the walk itself: an empty or edgeless graph would pass for no reason.
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get("src/app.ts")?.length).toBeGreaterThan(5);
    const cycles = findCycles(graph).map(describeCycle);
    expect(cycles, "import cycles (docs/architecture.md: no file imports a file that imports it back)").toEqual([]);
  });

  // One level up (docs/architecture.md, "every arrow points down"): a folder that imports a folder
  // which imports it back ties both, even when no file cycle runs between them, and the layers of
  // the house stop meaning anything. No cycle between rooms means no import runs back up.
  // The one import allowed to run back up, type-only: a Module is what `App.register` takes and
  // what it calls back with the App, so the SQL module names the App's type.
  const BACK_UP = [{ from: "src/sql/module.ts", to: "src/app.ts", line: 'import type { Module } from "../app.js";' }];

  it("has no cycle between the rooms of src/, supervisor/ and cli/", () => {
    const files = FOLDERS.flatMap(sourcesUnder);
    const graph = importGraph(new Map(files.map((file) => [file, readFileSync(join(ROOT, file), "utf8")])));
    for (const { from, to, line } of BACK_UP) {
      expect(graph.get(from), `${from} → ${to} is allowed but no longer exists: drop it from BACK_UP`).toContain(to);
      expect(readFileSync(join(ROOT, from), "utf8").split("\n"), `${from} → ${to} must stay type-only`).toContain(line);
      graph.set(from, graph.get(from)!.filter((target) => target !== to));
    }
    const { rooms, imports } = roomGraph(graph);
    expect(rooms.get("src/app.ts")).toContain("src/http/");
    const mutual = [...imports.keys()].filter((key) => {
      const [from, to] = key.split(" → ") as [string, string];
      return from < to && imports.has(`${to} → ${from}`);
    });
    const explain = (cycle: readonly string[]): string[] =>
      cycle.slice(1).flatMap((to, i) => imports.get(`${cycle[i]} → ${to}`) ?? []);
    expect(mutual, "folders importing each other").toEqual([]);
    expect(findCycles(rooms).map(explain), "imports running back up (a cycle between rooms)").toEqual([]);
  });
});
