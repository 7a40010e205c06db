import { readdirSync } from "node:fs";
import { join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

// The import graph of keelson's own code and its rooms: test/import-cycles.test.ts keeps it free of
// cycles, test/architecture-doc.test.ts holds docs/architecture.md's rooms table to it.
export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const FOLDERS = ["src", "supervisor", "cli"];

/** Every `.ts` file under `folder`, as a path relative to the repository root with `/` separators. */
export function sourcesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts"))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)).split("\\").join("/"));
}

/**
 * The import graph of `sources` (path → text): an edge for every relative specifier the compiler's
 * pre-processor finds, which covers `import`, `import type`, `export … from`, side-effect imports and
 * `import("./x.js")` / `typeof import("./x.js")` with a literal (comments and strings are skipped).
 * `./x.js` names `./x.ts`; a specifier outside `sources` (a package, node:…) is no edge.
 */
export function importGraph(sources: ReadonlyMap<string, string>): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const [file, text] of sources) {
    const targets = new Set<string>();
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!fileName.startsWith(".")) continue;
      const target = posix.normalize(posix.join(posix.dirname(file), fileName)).replace(/\.js$/, ".ts");
      if (sources.has(target)) targets.add(target);
    }
    graph.set(file, [...targets].toSorted());
  }
  return graph;
}

/** One path around each strongly connected component of more than one file (or a file importing itself). */
export function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  // Tarjan's algorithm, iterative so a long import chain cannot overflow the stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  for (const start of [...graph.keys()].toSorted()) {
    if (index.has(start)) continue;
    const work: { node: string; edge: number }[] = [{ node: start, edge: 0 }];
    index.set(start, next); low.set(start, next); next++;
    stack.push(start); onStack.add(start);
    while (work.length > 0) {
      const frame = work.at(-1)!;
      const edges = graph.get(frame.node) ?? [];
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++]!;
        if (!index.has(to)) {
          index.set(to, next); low.set(to, next); next++;
          stack.push(to); onStack.add(to);
          work.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(to)!));
        }
        continue;
      }
      work.pop();
      const parent = work.at(-1);
      if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(frame.node)!));
      if (low.get(frame.node) !== index.get(frame.node)) continue;
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== frame.node);
      if (component.length > 1 || (graph.get(frame.node) ?? []).includes(frame.node)) components.push(component);
    }
  }
  return components.map((component) => cyclePath(graph, new Set(component))).toSorted((a, b) => a[0]!.localeCompare(b[0]!));
}

/** A shortest path from the component's first file (sorted) back to itself, through the component only. */
function cyclePath(graph: ReadonlyMap<string, readonly string[]>, component: ReadonlySet<string>): string[] {
  const start = [...component].toSorted()[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const to of graph.get(node) ?? []) {
      if (!component.has(to)) continue;
      if (to === start) {
        const path = [start];
        for (let at: string | undefined = node; at !== undefined && at !== start; at = cameFrom.get(at)) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!cameFrom.has(to)) {
        cameFrom.set(to, node);
        queue.push(to);
      }
    }
  }
  throw new Error(`no cycle through ${start}`);
}

/**
 * The room a file lives in: a folder of `src/` (`src/http/`), a file directly under `src/`
 * (`src/app.ts`), or `supervisor/` / `cli/` as a whole.
 */
export function roomOf(file: string): string {
  const parts = file.split("/");
  if (parts[0] !== "src") return `${parts[0]}/`;
  return parts.length === 2 ? file : `src/${parts[1]}/`;
}

/** The graph of rooms, and for each room-to-room arrow the file imports that draw it. */
export function roomGraph(graph: ReadonlyMap<string, readonly string[]>): { rooms: Map<string, string[]>; imports: Map<string, string[]> } {
  const imports = new Map<string, string[]>();
  for (const [file, targets] of graph) {
    for (const target of targets) {
      const from = roomOf(file);
      const to = roomOf(target);
      if (from === to) continue;
      const key = `${from} → ${to}`;
      imports.set(key, [...(imports.get(key) ?? []), `${file} → ${target}`]);
    }
  }
  const rooms = new Map<string, string[]>();
  for (const file of graph.keys()) rooms.set(roomOf(file), rooms.get(roomOf(file)) ?? []);
  for (const key of imports.keys()) {
    const [from, to] = key.split(" → ") as [string, string];
    rooms.get(from)!.push(to);
  }
  for (const [room, targets] of rooms) rooms.set(room, targets.toSorted());
  return { rooms, imports };
}
