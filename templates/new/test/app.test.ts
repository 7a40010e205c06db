import { describe, expect, it } from "vitest";
import { buildApp } from "../src/app.js";

describe("{{name}}", () => {
  it("creates a note and reads it back", async () => {
    const app = buildApp();
    const post = await app.request("/api/notes", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "hello" }),
    });
    expect(post.status).toBe(201);
    const note = (await post.json()) as { id: string; text: string };
    const get = await app.request(`/api/notes/${note.id}`);
    expect(await get.json()).toEqual({ id: note.id, text: "hello" });
  });

  it("lists notes a page at a time", async () => {
    const app = buildApp();
    for (const text of ["one", "two", "three"]) {
      await app.request("/api/notes", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ text }) });
    }
    const page = await app.request("/api/notes?page=2&limit=2");
    expect(await page.json()).toMatchObject({ data: [{ text: "three" }], total: 3, page: 2, limit: 2, total_pages: 2 });
  });

  it("refuses an invalid body with a 422 naming the field", async () => {
    const response = await buildApp().request("/api/notes", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ text: "" }),
    });
    expect(response.status).toBe(422);
    const error = (await response.json()) as { code: string; errors: { path: string }[] };
    expect(error.code).toBe("VALIDATION_ERROR");
    expect(error.errors[0]?.path).toBe("body.text");
  });

  it("answers /health with UP and the notes check", async () => {
    const response = await buildApp().request("/health");
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: "UP", service: "{{name}}", checks: { notes: "UP" } });
  });
});
