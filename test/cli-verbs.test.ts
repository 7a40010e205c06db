// The `keelson` verbs come from one table (cli/verbs.ts): --help lists each one, an unknown word
// names all of them, and every verb in the table is dispatched (its own --help answers).
import { spawnSync } from "node:child_process";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { VERBS } from "../cli/verbs.js";

const ROOT = resolve(import.meta.dirname, "..");
const keelson = (args: string[]) =>
  spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "cli/cli.ts"), ...args], { cwd: ROOT, encoding: "utf8", timeout: 60_000 });

describe("the verbs of keelson", () => {
  it("--help lists every verb of the table; an unknown one names them all", () => {
    const help = keelson(["--help"]);
    expect(help.status).toBe(0);
    for (const verb of VERBS) expect(help.stdout).toMatch(new RegExp(`^  keelson ${verb.name} .*${verb.summary.replace(/[()+]/g, "\\$&")}`, "m"));
    const unknown = keelson(["frobnicate"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain(`unknown command "frobnicate" (expected one of: ${VERBS.map((v) => v.name).join(", ")})`);
  });

  it("every verb of the table is dispatched: its --help answers with its own usage, exit 0", () => {
    for (const { name } of VERBS) {
      const result = keelson([name, "--help"]);
      expect(result.status, `${name}: ${result.stderr}`).toBe(0);
      expect(result.stdout, name).toMatch(new RegExp(`^(Usage:)? +keelson ${name}\\b`, "m"));
    }
  }, 120_000);
});
