// Compares two vitest JSON reports of h3's suite (scripts/h3-suite.sh): h3's own app (the baseline)
// and keelson's. Prints the counts and every test that fails only under keelson, each with the
// documented difference (scripts/h3-suite/differences.txt) that explains it, or as UNDOCUMENTED.
// Exits 1 when any is undocumented.
import { readFileSync } from "node:fs";

const [baselineFile, keelsonFile, differencesFile] = process.argv.slice(2);
const results = (file) => {
  const report = JSON.parse(readFileSync(file, "utf8"));
  const map = new Map();
  for (const suite of report.testResults) {
    const name = suite.name.replace(/^.*\/test\//, "test/");
    for (const test of suite.assertionResults) map.set(`${name} > ${test.fullName}`, test.status);
    // A file that failed to load has no tests: count it as one failure.
    if (suite.assertionResults.length === 0 && suite.status === "failed") map.set(`${name} > (the file failed to load)`, "failed");
  }
  return map;
};
// Each line: the test file, a fragment of the test's title, and the difference (with its docs/h3.md section).
const differences = readFileSync(differencesFile, "utf8").split("\n")
  .filter((line) => line.trim() !== "" && !line.startsWith("#"))
  .map((line) => {
    const [file, fragment, why] = line.split("\t");
    return { file: `${file.trim()} > `, fragment: (fragment ?? "").trim(), why: (why ?? "").trim() };
  });
const baseline = results(baselineFile);
const keelson = results(keelsonFile);
const count = (map, status) => [...map.values()].filter((s) => s === status).length;
const run = (map) => count(map, "passed") + count(map, "failed");
console.log(`h3's own app: ${count(baseline, "passed")} of ${run(baseline)} passed`);
console.log(`keelson's app: ${count(keelson, "passed")} of ${run(keelson)} passed`);
const onlyKeelson = [...keelson].filter(([name, status]) => status === "failed" && baseline.get(name) === "passed").map(([name]) => name);
const bothFail = [...keelson].filter(([name, status]) => status === "failed" && baseline.get(name) !== "passed").length;
console.log(`failing with h3's own app too (the suite's h3 is not the installed one): ${bothFail}`);
let undocumented = 0;
const byReason = new Map();
for (const name of onlyKeelson) {
  const difference = differences.find((d) => name.startsWith(d.file) && name.slice(d.file.length).includes(d.fragment));
  if (difference === undefined) {
    undocumented++;
    console.log(`UNDOCUMENTED  ${name}`);
  } else byReason.set(difference.why, (byReason.get(difference.why) ?? 0) + 1);
}
console.log(`failing only with keelson's app: ${onlyKeelson.length}, of them documented: ${onlyKeelson.length - undocumented}, undocumented: ${undocumented}`);
for (const [why, n] of byReason) console.log(`  ${n}  ${why}`);
process.exit(undocumented > 0 ? 1 : 0);
