import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

// Every TypeScript block of README.md and docs/*.md is compiled against the real sources, so an
// example cannot drift from the API it shows. A block that is a fragment says what it assumes in an
// HTML comment right above its fence (invisible on the rendered page):
//   <!-- prelude: import { App } from "keelson"; declare const app: App; -->

const root = fileURLToPath(new URL("..", import.meta.url));

interface CodeBlock {
  page: string;
  line: number;
  prelude: string;
  code: string;
}

/** The ```ts blocks of one Markdown page, with the prelude comment above each, if any. */
function readCodeBlocks(page: string): CodeBlock[] {
  const lines = readFileSync(join(root, page), "utf8").split("\n");
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```(ts|typescript)\s*$/.test(lines[i] ?? "")) continue;
    const end = lines.findIndex((line, j) => j > i && line.startsWith("```"));
    if (end < 0) throw new Error(`${page}:${i + 1}: unclosed code block`);
    blocks.push({ page, line: i + 1, prelude: readPrelude(lines, i), code: lines.slice(i + 1, end).join("\n") });
    i = end;
  }
  return blocks;
}

function readPrelude(lines: string[], fence: number): string {
  let j = fence - 1;
  while (j >= 0 && (lines[j] ?? "").trim() === "") j--;
  if (!(lines[j] ?? "").trim().endsWith("-->")) return "";
  const end = j;
  while (j >= 0 && !(lines[j] ?? "").includes("<!--")) j--;
  const comment = lines.slice(j, end + 1).join("\n");
  const match = /<!--\s*prelude:([\s\S]*?)-->/.exec(comment);
  return match?.[1]?.trim() ?? "";
}

/** `keelson`, `keelson/metrics`, … resolve to the sources the package's `exports` are built from. */
function packagePaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    name: string;
    exports: Record<string, string | { types?: string }>;
  };
  const paths: Record<string, string[]> = {};
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    const types = typeof target === "string" ? undefined : target.types;
    if (types === undefined) continue;
    const source = types.replace(/^\.\/dist\//, "./").replace(/\.d\.ts$/, ".ts");
    paths[subpath === "." ? pkg.name : `${pkg.name}/${subpath.slice(2)}`] = [source];
  }
  return paths;
}

function compilerOptions(): ts.CompilerOptions {
  const configPath = join(root, "tsconfig.json");
  const config = ts.readConfigFile(configPath, (path) => ts.sys.readFile(path));
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  return { ...parsed.options, noEmit: true, baseUrl: root, paths: packagePaths() };
}

const pages = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const blocks = pages.flatMap(readCodeBlocks);

describe("TypeScript blocks of README.md and docs/", () => {
  it("finds the blocks", () => {
    expect(blocks.length).toBeGreaterThan(10);
  });

  it("every block compiles against the real sources", () => {
    // One virtual module per block, beside the page, so bare imports resolve from the project.
    const files = new Map<string, { block: CodeBlock; text: string; preludeLines: number }>();
    for (const block of blocks) {
      const file = join(root, dirname(block.page), `.${block.page.replaceAll("/", "_")}-${block.line}.ts`);
      const prelude = block.prelude === "" ? "" : `${block.prelude}\n`;
      files.set(file, { block, text: `${prelude}${block.code}\nexport {};\n`, preludeLines: prelude.split("\n").length - 1 });
    }
    const options = compilerOptions();
    const host = ts.createCompilerHost(options);
    const readFile = host.readFile.bind(host);
    const getSourceFile = host.getSourceFile.bind(host);
    host.fileExists = (name) => files.has(name) || ts.sys.fileExists(name);
    host.readFile = (name) => files.get(name)?.text ?? readFile(name);
    host.getSourceFile = (name, languageVersion, onError, shouldCreate) => {
      const virtual = files.get(name);
      return virtual === undefined
        ? getSourceFile(name, languageVersion, onError, shouldCreate)
        : ts.createSourceFile(name, virtual.text, languageVersion, true);
    };
    const program = ts.createProgram([...files.keys()], options, host);
    const problems = ts.getPreEmitDiagnostics(program).flatMap((diagnostic) => {
      const virtual = diagnostic.file === undefined ? undefined : files.get(diagnostic.file.fileName);
      if (virtual === undefined || diagnostic.file === undefined) {
        const where = diagnostic.file === undefined ? "" : `${relative(root, diagnostic.file.fileName)}: `;
        return [`${where}${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`];
      }
      const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      const where = line < virtual.preludeLines
        ? `${virtual.block.page}:${virtual.block.line} (prelude)`
        : `${virtual.block.page}:${virtual.block.line + 1 + line - virtual.preludeLines}`;
      return [`${where}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")}`];
    });
    expect(problems).toEqual([]);
    // One TypeScript program over every page's blocks and the sources they import: on a shared
    // machine whose CPU other work takes, it can outlast the default timeout.
  }, 120_000);
});
