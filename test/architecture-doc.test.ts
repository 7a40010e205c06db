// docs/architecture.md kept true by the code: its rooms table's imports column is the import graph
// (computed as test/import-cycles.test.ts computes it), every room is in the table once, and every
// file, folder and entry point the page names exists.
import { existsSync, globSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { describe, expect, it } from "vitest";
import config from "../vitest.config.js";
import { FOLDERS, ROOT, importGraph, roomGraph, roomOf, sourcesUnder } from "./helpers/import-graph.js";

const PAGE = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");

/** The backticked names of `text` that name a file or a folder: a `/` or a file extension, no spaces. */
function pathsIn(text: string): string[] {
  return [...text.matchAll(/`([^`\s]+)`/g)].map((match) => match[1]!)
    .filter((name) => /\/|\.(ts|mjs|md)$/.test(name) && !/^(\/|@|dist\/|https?:|keelson\/)/.test(name));
}

/** A room's name as the table writes it (`http/path.ts`, `app.ts`, `src/http/`, `supervisor/`) as a path from the root. */
function fromRoot(name: string): string {
  return /^(src|supervisor|cli)\//.test(name) ? name : `src/${name}`;
}

/** The room a name of the table stands for: a folder of `src/`, a file directly under it, `supervisor/` or `cli/`. */
function roomNamed(name: string): string {
  const path = fromRoot(name);
  return path.endsWith("/") && path.split("/").length === 3 ? path : roomOf(path.endsWith("/") ? `${path}x.ts` : path);
}

interface Row {
  rooms: string[];
  imports: string[];
}

/** The rows of the rooms table: the rooms of its first column and the rooms its third column lists. */
function roomsTable(page: string): Row[] {
  const section = page.slice(page.indexOf("## The rooms"), page.indexOf("Two rules hold everywhere"));
  return section.split("\n").filter((line) => line.startsWith("| `")).map((line) => {
    const cells = line.split(/(?<!\\)\|/).slice(1, -1);
    if (cells.length !== 3) throw new Error(`a row of the rooms table has ${cells.length} cells, not 3: ${line}`);
    return { rooms: pathsIn(cells[0]!).map(roomNamed), imports: [...new Set(pathsIn(cells[2]!).map(roomNamed))].toSorted() };
  });
}

describe("docs/architecture.md", () => {
  const files = FOLDERS.flatMap(sourcesUnder);
  const { rooms } = roomGraph(importGraph(new Map(files.map((file) => [file, readFileSync(join(ROOT, file), "utf8")]))));
  const rows = roomsTable(PAGE);

  it("reads its rooms table (the parser itself)", () => {
    const [row] = roomsTable("## The rooms\n| a | b | c |\n|---|---|---|\n| `src/x/`, `src/y.ts` | `App` in `http/z.ts` | `http/path.ts`, `checks.ts` (the `Module` type), `supervisor/` |\nTwo rules hold everywhere");
    expect(row).toEqual({ rooms: ["src/x/", "src/y.ts"], imports: ["src/checks.ts", "src/http/", "supervisor/"] });
    expect(rows.length).toBeGreaterThan(10);
  });

  it("lists every room of the code once", () => {
    const listed = rows.flatMap((row) => row.rooms);
    expect(listed.filter((room, i) => listed.indexOf(room) !== i), "rooms listed twice").toEqual([]);
    expect(listed.toSorted()).toEqual([...rooms.keys()].toSorted());
  });

  it("says in its imports column exactly what each row's rooms import", () => {
    for (const row of rows) {
      const actual = [...new Set(row.rooms.flatMap((room) => rooms.get(room) ?? []))].filter((room) => !row.rooms.includes(room)).toSorted();
      expect(row.imports, `the imports of ${row.rooms.join(", ")}`).toEqual(actual);
    }
  });

  it("names only files and folders that exist", () => {
    const basenames = new Set(FOLDERS.flatMap(sourcesUnder).map((file) => basename(file)));
    const missing = [...new Set(pathsIn(PAGE))].filter((name) => {
      if (name.includes("*")) {
        const [folder, pattern] = [name.slice(0, name.lastIndexOf("/")), name.slice(name.lastIndexOf("/") + 1)];
        const matches = new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`);
        return !readdirSync(join(ROOT, folder)).some((file) => matches.test(file));
      }
      // A bare file name (`ipc.ts`, `primary.ts`) stands for one in its sentence's folder.
      if (!name.includes("/")) return !basenames.has(name);
      return !existsSync(join(ROOT, name)) && !existsSync(join(ROOT, fromRoot(name)));
    });
    expect(missing).toEqual([]);
  });

  it("names the seven entry points that test/exports.test.ts snapshots", () => {
    const snapshot = readFileSync(join(ROOT, "test/exports.test.ts"), "utf8");
    const entries = [...snapshot.matchAll(/"\.\.\/((?:src|supervisor)\/[^"]+\.ts)"/g)].map((match) => match[1]!);
    expect(new Set(entries).size).toBe(7);
    const sentence = PAGE.slice(PAGE.indexOf("entry points are"), PAGE.indexOf("snapshots what each exports"));
    expect(pathsIn(sentence).filter((name) => !name.startsWith("test/")).toSorted()).toEqual([...new Set(entries)].toSorted());
  });
});

describe("docs/contributing.md", () => {
  it("counts the test files of each project as vitest.config.ts assigns them", () => {
    const page = readFileSync(join(ROOT, "docs/contributing.md"), "utf8");
    const sentence = page.slice(page.indexOf("The projects hold"), page.indexOf("--filesOnly"));
    const said = Object.fromEntries([...sentence.matchAll(/`(\w+)` (\d+)/g)].map((match) => [match[1]!, Number(match[2])]));
    const projects = (config.test?.projects ?? []) as Array<{ test: { name: string; include: string[]; exclude?: string[] } }>;
    const counted = Object.fromEntries(projects.filter(({ test }) => test.name in said).map(({ test }) => {
      const excluded = new Set(globSync(test.exclude ?? [], { cwd: ROOT }));
      return [test.name, new Set(globSync(test.include, { cwd: ROOT }).filter((file) => !excluded.has(file))).size];
    }));
    expect(Object.keys(said)).toEqual(["unit", "socket", "process", "browser", "tooling"]);
    expect(said).toEqual(counted);
  });
});
