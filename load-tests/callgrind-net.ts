// Splits the callgrind files that `bench.ts instructions --profile DIR` keeps into what V8's
// compilers and its garbage collector spent and the rest ("net": the request path itself), per
// request (net's "(JIT code)" and unoptimised parts shown apart); with --diff, the net functions that differ most between two files.
// Files counted with `--cache-sim` also get the simulated cache misses per request, split the same way;
// `--event D1mr` (any event the file has) makes --diff compare that event instead of instructions.
//
//   node --import tsx load-tests/callgrind-net.ts --requests 8000 DIR/callgrind.keelson-POST-books.out [...]
//   node --import tsx load-tests/callgrind-net.ts --requests 8000 --diff A.out B.out [--top 40] [--event Ir]
//
// Why: a counted window's total moves by tens of thousands of instructions per request between
// runs of the same code, with the functions TurboFan happens to be optimising and the collections
// that happen to fall in it. Those are the first things to take out before comparing two targets.
// JIT-compiled JavaScript has no symbols under callgrind: it shows as one "(JIT code)" line.
import { execFileSync } from "node:child_process";
import { closeSync, openSync, readSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";

/** V8's compilers (TurboFan, Turboshaft, Maglev, Sparkplug, the bytecode generator and parser). */
const COMPILER = /v8::internal::compiler::|v8::internal::maglev::|turboshaft|v8::internal::baseline::|v8::internal::interpreter::|BytecodeGenerator|v8::internal::Parser|v8::internal::Compiler::|v8::internal::Pipeline|OptimizedCompilationJob|TurbofanCompilationJob|v8::internal::Zone/;
/** The garbage collector: scavenges, marking (concurrent too), sweeping, evacuation, write barriers. */
const GC = /v8::internal::(Heap::|Scavenger|ScavengerCollector|MarkCompact|Marking|ConcurrentMarking|MinorMarkSweep|Sweeper|RootScavengeVisitor|RootMarkingVisitor|\w*MarkingVisitor|BodyDescriptorBase|MemoryAllocator|GCTracer|IncrementalMarking|LocalHeap|Evacuat|RememberedSet|SlotSet|ArrayBufferSweeper|PagedSpace|FreeList|MarkingBitmap|LiveObjectVisitor|JSFunction::BodyDescriptor|HeapObject::SizeFromMap|\{anonymous\}::IterateObjectCache)|heap::base::|cppgc::|RecordWrite|ScavengeVisitor|EvacuateVisitor/;

/**
 * Part of net, shown apart: property-access inline caches called as builtins and Sparkplug
 * (baseline) helpers, which code TurboFan has optimised mostly does without. A large share means
 * the window still ran much unoptimised code, which moves from run to run with the warm-up.
 */
const UNOPTIMISED = /^\?\?\?:Builtins_(\w*Baseline\w*|Interpreter\w*|(Keyed)?(Load|Store|DefineNamedOwn|DefineKeyedOwn)IC(_PolymorphicName)?)$/;

/** The qualified name without its argument list, whose parameter types would match anything. */
function head(name: string): string {
  return name.replaceAll("(anonymous namespace)", "{anonymous}").split("(", 1)[0]!;
}

type Kind = "compiler" | "gc" | "net";

function kindOf(name: string): Kind {
  const qualified = head(name);
  if (COMPILER.test(qualified)) return "compiler";
  return GC.test(qualified) ? "gc" : "net";
}

const events = new Map<string, string[]>();

/** The events a callgrind file counted (`Ir` alone, or with the cache simulation's misses), read once from its header. */
function eventsOf(file: string): string[] {
  let found = events.get(file);
  if (found === undefined) {
    const start = Buffer.alloc(64 * 1024);
    const fd = openSync(file, "r");
    try {
      const read = readSync(fd, start, 0, start.length, 0);
      found = /^events:\s*(.*)$/m.exec(start.toString("utf8", 0, read))?.[1]?.trim().split(/\s+/) ?? ["Ir"];
    } finally {
      closeSync(fd);
    }
    events.set(file, found);
  }
  return found;
}

/** Self counts of `event` (instructions by default) for every function in one callgrind file, and the file's total. */
function functionsOf(file: string, event = "Ir"): { total: number; self: Map<string, number> } {
  const text = execFileSync("callgrind_annotate", ["--inclusive=no", "--threshold=100", `--show=${event}`, `--sort=${event}`, file], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
  const totalMatch = /^([\d,]+) .*PROGRAM TOTALS/m.exec(text);
  if (totalMatch === null) throw new Error(`${file}: no PROGRAM TOTALS in callgrind_annotate's output`);
  const self = new Map<string, number>();
  const listing = text.split("file:function")[1] ?? "";
  for (const line of listing.split("\n")) {
    const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    if (match === null) continue;
    const name = match[2]!.replace(/ \[[^\]]*\]$/, "").replace(/^\?\?\?:0x[0-9a-f]+('\d+)?$/, "(JIT code)");
    self.set(name, (self.get(name) ?? 0) + Number(match[1]!.replaceAll(",", "")));
  }
  return { total: Number(totalMatch[1]!.replaceAll(",", "")), self };
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { requests: { type: "string" }, diff: { type: "boolean", default: false }, top: { type: "string", default: "40" }, event: { type: "string", default: "Ir" } },
});
const requests = Number(values.requests);
if (!(requests > 0) || positionals.length === 0 || (values.diff && positionals.length !== 2)) {
  console.error("usage: callgrind-net.ts --requests N FILE... | --requests N --diff A B [--top N] [--event Ir|I1mr|D1mr|D1mw|ILmr|DLmr|DLmw]");
  process.exit(2);
}
const perRequest = (n: number) => Math.round(n / requests).toLocaleString("en-US");

if (values.diff) {
  const event = values.event;
  for (const file of positionals) if (!eventsOf(file).includes(event)) throw new Error(`${file} has no ${event} counts (its events: ${eventsOf(file).join(" ")})`);
  const [a, b] = positionals.map((file) => functionsOf(file, event)) as [ReturnType<typeof functionsOf>, ReturnType<typeof functionsOf>];
  const names = new Set([...a.self.keys(), ...b.self.keys()].filter((name) => kindOf(name) === "net"));
  const rows = [...names].map((name) => ({ name, a: a.self.get(name) ?? 0, b: b.self.get(name) ?? 0 }))
    .toSorted((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a)).slice(0, Number(values.top));
  console.log(`net ${event === "Ir" ? "instructions" : event} per request, functions that differ most: ${path.basename(positionals[0]!)} → ${path.basename(positionals[1]!)}`);
  for (const row of rows) {
    const delta = Math.round((row.b - row.a) / requests);
    console.log(`${(delta > 0 ? "+" : "") + delta.toLocaleString("en-US")}`.padStart(9), perRequest(row.a).padStart(9), perRequest(row.b).padStart(9), ` ${row.name.slice(0, 140)}`);
  }
} else {
  console.log(["file".padEnd(44), "total", "compiler", "gc", "net", "(JIT code)", "unoptimised"].map((h, i) => (i === 0 ? h : h.padStart(12))).join(""));
  for (const file of positionals) {
    const { total, self } = functionsOf(file);
    const sums: Record<Kind, number> = { compiler: 0, gc: 0, net: 0 };
    for (const [name, count] of self) sums[kindOf(name)] += count;
    // Instructions callgrind_annotate lists under no function (below its threshold: none at 100 %) count as net.
    sums.net += total - sums.compiler - sums.gc - sums.net;
    let unoptimised = 0;
    for (const [name, count] of self) if (UNOPTIMISED.test(name)) unoptimised += count;
    console.log(path.basename(file).padEnd(44) + [total, sums.compiler, sums.gc, sums.net, self.get("(JIT code)") ?? 0, unoptimised].map((n) => perRequest(n).padStart(12)).join(""));
  }
  const misses = ["I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"];
  const simulated = positionals.filter((file) => misses.every((event) => eventsOf(file).includes(event)));
  if (simulated.length > 0) {
    // Net of compiler and GC as above; "(JIT code)" is the optimised JavaScript's share of the net.
    console.log(`\nsimulated cache misses per request (net / all, then the JIT code's part of net)`);
    console.log(["file".padEnd(44), ...misses].map((h, i) => (i === 0 ? h : h.padStart(24))).join(""));
    const tenths = (n: number) => (n / requests).toFixed(1);
    for (const file of simulated) {
      const cells = misses.map((event) => {
        const { total, self } = functionsOf(file, event);
        let net = total;
        for (const [name, count] of self) if (kindOf(name) !== "net") net -= count;
        return `${tenths(net)} / ${tenths(total)} (${tenths(self.get("(JIT code)") ?? 0)})`;
      });
      console.log(path.basename(file).padEnd(44) + cells.map((cell) => cell.padStart(24)).join(""));
    }
  }
}
