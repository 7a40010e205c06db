// The `keelson` verbs come from one table (cli/verbs.ts): --help lists each one, an unknown word
// names all of them, and every verb in the table is dispatched (its own --help answers with its
// usage alone).
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

  it("every verb of the table is dispatched: `keelson <verb> --help` prints that verb's usage alone, exit 0", async () => {
    const global = keelson(["--help"]).stdout;
    for (const verb of VERBS) {
      const result = keelson([verb.name, "--help"]);
      expect(result.status, `${verb.name}: ${result.stderr}`).toBe(0);
      expect(result.stdout, verb.name).toBe(`${(await verb.load()).usage}\n`);
      expect(result.stdout, verb.name).toMatch(new RegExp(`^Usage: keelson ${verb.name}\\b`));
      // Not the global help, and no other verb's usage.
      expect(result.stdout, verb.name).not.toContain("Commands:");
      expect(result.stdout.match(/^Usage: keelson \S+/gm), verb.name).toEqual([`Usage: keelson ${verb.name}`]);
      expect(result.stdout, verb.name).not.toBe(global);
      // -h too, and a --help after `--` is the entry's, not keelson's.
      expect(keelson([verb.name, "-h"]).stdout, verb.name).toBe(result.stdout);
    }
    const entryHelp = keelson(["start", "missing.js", "--", "--help"]);
    expect(entryHelp.status).toBe(2);
    expect(entryHelp.stderr).toMatch(/^keelson: entry not found/);
  }, 180_000);
});
