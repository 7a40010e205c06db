// What a generated request id costs: candidates timed in a tight loop, interleaved round after
// round so machine noise hits them alike; median and best round of ns per id. keelson's own
// generator (src/http/request-id.ts) is one of them, next to the usual alternatives.
//
//   node --import tsx load-tests/bench.ts request-id [--ids 1000000] [--rounds 9]
import { randomBytes, randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { generateRequestId, isValidRequestId } from "../../src/http/request-id.js";

const { values } = parseArgs({ options: { ids: { type: "string", default: "1000000" }, rounds: { type: "string", default: "9" } } });
const IDS = Number(values.ids);
const ROUNDS = Number(values.rounds);
if (!(IDS > 0) || !(ROUNDS > 0)) {
  console.error("usage: node --import tsx load-tests/bench.ts request-id [--ids N] [--rounds N]");
  process.exit(2);
}

const PREFIX = randomBytes(5).toString("hex") + "-";
let base36 = 0;
const candidates: Record<string, () => string> = {
  "keelson: prefix + counter": generateRequestId,
  "prefix + counter in base 36": () => PREFIX + (++base36).toString(36),
  "crypto.randomUUID()": () => randomUUID(),
  "crypto.randomUUID({ disableEntropyCache })": () => randomUUID({ disableEntropyCache: true }),
  "randomBytes(16).toString(\"hex\")": () => randomBytes(16).toString("hex"),
};

// The result of every id is folded into this, so no loop can be optimised away.
let sink = 0;
function time(make: () => string): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < IDS; i++) sink += make().length;
  return Number(process.hrtime.bigint() - start) / IDS;
}

const samples = new Map<string, number[]>(Object.keys(candidates).map((name) => [name, []]));
for (const make of Object.values(candidates)) time(make);
for (let round = 0; round < ROUNDS; round++) {
  const order = Object.entries(candidates);
  if (round % 2 === 1) order.reverse();
  for (const [name, make] of order) samples.get(name)!.push(time(make));
}

const median = (xs: number[]): number => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`ns per id: ${IDS} ids per round, ${ROUNDS} rounds, node ${process.version}`);
console.log(`${"candidate".padEnd(44)} ${"median".padStart(8)} ${"best".padStart(8)}  example`);
for (const [name, make] of Object.entries(candidates)) {
  const xs = samples.get(name)!;
  const example = make();
  if (!isValidRequestId(example)) throw new Error(`${name} makes ids keelson would not accept: ${example}`);
  console.log(`${name.padEnd(44)} ${median(xs).toFixed(1).padStart(8)} ${Math.min(...xs).toFixed(1).padStart(8)}  ${example}`);
}
if (sink === 0) console.log("(nothing generated)");
