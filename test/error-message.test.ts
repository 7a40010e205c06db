// One way a caught value becomes words (errorMessage), used everywhere instead of inline casts.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { errorMessage } from "../src/errors.js";

const ROOT = join(import.meta.dirname, "..");

describe("errorMessage", () => {
  it("gives an Error's message, else its name; a string as it is; anything else as JSON or String()", () => {
    expect(errorMessage(new TypeError("bad input"))).toBe("bad input");
    expect(errorMessage(new RangeError(""))).toBe("RangeError");
    expect(errorMessage({ message: "from another realm" })).toBe("from another realm");
    expect(errorMessage("plain words")).toBe("plain words");
    expect(errorMessage({ code: 7 })).toBe('{"code":7}');
    expect(errorMessage(undefined)).toBe("undefined");
    expect(errorMessage(null)).toBe("null");
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(errorMessage(circular)).toBe("[object Object]");
  });

  it("is the only error-to-text in src/, supervisor/ and cli/", () => {
    const inline = /\((error|err|cause|e) as Error\)\??\.message|(error|err|e) instanceof Error \? (error|err|e)\.message/;
    const found = ["src", "supervisor", "cli"].flatMap((folder) => readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
      .filter((file) => file.endsWith(".ts")).map((file) => join(folder, file)))
      .filter((file) => inline.test(readFileSync(join(ROOT, file), "utf8")));
    expect(found).toEqual([]);
  });
});
