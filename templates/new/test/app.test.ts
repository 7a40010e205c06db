import { createTestLogger } from "keelson";
import { afterEach, describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";

// The App's log lines (one per request) are kept in memory, not printed: the test output stays
// quiet. A failing test shows them.
const logger = createTestLogger();
const newApp = () => buildApp({ logger });

afterEach((context) => {
  if (context.task.result?.state === "fail") process.stdout.write(logger.output());
  logger.clear();
});

describe("{{name}}", () => {
  it("creates a note and reads it back", async () => {
    const app = newApp();
    const post = await app.request("/api/notes", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "hello" }),
    });
    expect(post.status).toBe(201);
    const note = (await post.json()) as { id: string; text: string };
    const get = await app.request(`/api/notes/${note.id}`);
    expect(await get.json()).toEqual({ id: note.id, text: "hello" });
    // What the App logged, read back: its request lines.
    expect(logger.lines()).toContainEqual(expect.stringMatching(/ POST \/api\/notes 201 /));
  });

  it("lists notes a page at a time", async () => {
    const app = newApp();
    for (const text of ["one", "two", "three"]) {
      await app.request("/api/notes", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text }) });
    }
    const page = await app.request("/api/notes?page=2&limit=2");
    expect(await page.json()).toMatchObject({ data: [{ text: "three" }], total: 3, page: 2, limit: 2, total_pages: 2 });
  });

  it("refuses an invalid body with a 422 naming the field", async () => {
    const response = await newApp().request("/api/notes", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "" }),
    });
    expect(response.status).toBe(422);
    const error = (await response.json()) as { code: string; errors: { path: string }[] };
    expect(error.code).toBe("VALIDATION_ERROR");
    expect(error.errors[0]?.path).toBe("body.text");
  });

  it("answers /health with UP and the database check", async () => {
    const response = await newApp().request("/health");
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: "UP", service: "{{name}}", checks: { database: "UP" } });
  });
});
