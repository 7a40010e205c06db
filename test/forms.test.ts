/**
 * Form bodies (`bodyType: "form"`): multipart uploads and URL-encoded forms validated by the route's
 * body schema, their limits, and the temporary files they leave behind (none), through
 * `app.request()` and a real socket; a client that disconnects mid-upload over a raw socket.
 */
import { mkdtempSync, readdirSync, rmSync, watch } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { App, post, put } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";
import { listenOn } from "./helpers/listen.js";
import { sendRaw } from "./helpers/raw-http.js";

const uploads = mkdtempSync(join(tmpdir(), "keelson-forms-test-"));
afterAll(() => rmSync(uploads, { recursive: true, force: true }));
const leftovers = () => readdirSync(uploads);

const Cover = z.object({
  title: z.string().min(1),
  year: z.number().int().optional(),
  draft: z.boolean().optional(),
  tags: z.array(z.string()).optional(),
  cover: z.file().max(64 * 1024).mime(["image/png", "image/jpeg"]),
});

function coverForm(bytes = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]), type = "image/png"): FormData {
  const form = new FormData();
  form.append("title", "Dune");
  form.append("year", "1965");
  form.append("draft", "true");
  form.append("tags", "sf");
  form.append("tags", "classic");
  form.append("cover", new File([bytes], "dune.png", { type }));
  return form;
}

describeBoth(
  "form bodies",
  (base) => {
    const app = new App({ ...base, bodyLimit: 256 * 1024 });
    app.route(post("/covers", { body: Cover, bodyType: "form", formLimits: { tmpDir: uploads } }, async (ctx) => {
      const { cover, ...fields } = ctx.body;
      // The file is on disk while the handler runs.
      expect(leftovers().length).toBe(1);
      return { ...fields, name: cover.name, type: cover.type, size: cover.size, first: [...new Uint8Array(await cover.slice(0, 4).arrayBuffer())] };
    }));
    app.route(post("/plain", { body: z.object({ name: z.string(), n: z.number() }), bodyType: "form" }, (ctx) => ctx.body));
    app.route(put("/tight", {
      body: z.object({ files: z.array(z.file()).optional(), note: z.string().optional() }).loose(), bodyType: "form", bodyLimit: 4096,
      formLimits: { fileSize: 1000, files: 2, fields: 3, fieldSize: 100, tmpDir: uploads },
    }, (ctx) => ({ keys: Object.keys(ctx.body) })));
    app.route(post("/failing", { body: z.object({ cover: z.file() }), bodyType: "form", formLimits: { tmpDir: uploads } }, () => {
      throw new Error("the handler failed");
    }));
    return app;
  },
  (t) => {
    it("validates fields (coerced from text like a query) and files, and removes the files once the handler is done", async () => {
      const res = await t().fetch("/covers", { method: "POST", body: coverForm() });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        title: "Dune", year: 1965, draft: true, tags: ["sf", "classic"], name: "dune.png", type: "image/png", size: 7, first: [0x89, 0x50, 0x4e, 0x47],
      });
      expect(leftovers()).toEqual([]);
    });

    it("reads URL-encoded forms with the same schema mechanism", async () => {
      const res = await t().fetch("/plain", { method: "POST", body: new URLSearchParams({ name: "Ada", n: "42" }) });
      expect(await res.json()).toEqual({ name: "Ada", n: 42 });
      const bad = await t().fetch("/plain", { method: "POST", body: new URLSearchParams({ name: "Ada", n: "many" }) });
      expect(bad.status).toBe(422);
      expect(await bad.json()).toMatchObject({ code: "VALIDATION_ERROR", errors: [{ path: "body.n" }] });
    });

    it("answers 422 naming the field for a missing or wrong file, and leaves no file behind", async () => {
      const form = coverForm();
      form.delete("cover");
      const missing = await t().fetch("/covers", { method: "POST", body: form });
      expect(missing.status).toBe(422);
      expect(await missing.json()).toMatchObject({ errors: [{ path: "body.cover" }] });
      const wrongType = await t().fetch("/covers", { method: "POST", body: coverForm(undefined, "text/plain") });
      expect(wrongType.status).toBe(422);
      expect(leftovers()).toEqual([]);
    });

    it("answers 415 for a JSON body on a form route", async () => {
      const res = await t().fetch("/plain", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(res.status).toBe(415);
      expect(await res.json()).toEqual({ status_code: 415, code: "UNSUPPORTED_MEDIA_TYPE", message: "Request body must be multipart/form-data or application/x-www-form-urlencoded" });
    });

    it.each([
      ["a file over fileSize", () => {
        const form = new FormData();
        form.append("files", new File([new Uint8Array(1001)], "a.bin"));
        return form;
      }, "File files exceeds the limit of 1000 bytes"],
      ["more files than files", () => {
        const form = new FormData();
        for (let i = 0; i < 3; i++) form.append("files", new File([new Uint8Array(10)], `${i}.bin`));
        return form;
      }, "Form has more than 2 file(s)"],
      ["more fields than fields", () => new URLSearchParams([["a", "1"], ["b", "2"], ["c", "3"], ["d", "4"]]), "Form has more than 3 field(s)"],
      ["a field over fieldSize", () => new URLSearchParams({ note: "x".repeat(101) }), "Field note exceeds the limit of 100 bytes"],
      // Cut to 256 bytes it would be another field's name, or pass a schema's check as one.
      ["a field name over 256 bytes", () => new URLSearchParams({ ["n".repeat(257)]: "1" }), "A field name exceeds the limit of 256 bytes"],
    ])("answers 413 with the KError body for %s, and leaves no file behind", async (_, body, message) => {
      const res = await t().fetch("/tight", { method: "PUT", body: body() });
      expect(res.status).toBe(413);
      expect(await res.json()).toEqual({ status_code: 413, code: "PAYLOAD_TOO_LARGE", message });
      expect(leftovers()).toEqual([]);
    });

    it("answers 400 for a malformed multipart body", async () => {
      const res = await t().fetch("/plain", { method: "POST", headers: { "content-type": "multipart/form-data" }, body: "--x\r\n" });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ code: "BAD_REQUEST" });
    });

    it("removes the files when the handler throws (500)", async () => {
      const form = new FormData();
      form.append("cover", new File([new Uint8Array(100)], "a.png", { type: "image/png" }));
      expect((await t().fetch("/failing", { method: "POST", body: form })).status).toBe(500);
      expect(leftovers()).toEqual([]);
    });
  },
);

describe("form bodies on a real socket", () => {
  it("answers 413 by Content-Length and by what arrives while streaming, without a file left behind", async () => {
    const app = new App({ port: 0 });
    app.route(post("/upload", { body: z.object({ file: z.file() }).loose(), bodyType: "form", bodyLimit: 4096, formLimits: { tmpDir: uploads } }, () => ({})));
    const server = await listenOn(app);
    try {
      const part = `--b\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\n\r\n${"x".repeat(5000)}\r\n--b--\r\n`;
      const declared = await sendRaw(server.port, `PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${part.length}\r\n\r\n`, "");
      expect(declared.status).toBe(405);
      const byLength = await sendRaw(server.port, `POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${part.length}\r\n\r\n`, part);
      expect([byLength.status, JSON.parse(byLength.body)]).toEqual([413, { status_code: 413, code: "PAYLOAD_TOO_LARGE", message: "Request body exceeds the limit of 4096 bytes" }]);
      const chunked = `${part.length.toString(16)}\r\n${part}\r\n0\r\n\r\n`;
      const streamed = await sendRaw(server.port, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nTransfer-Encoding: chunked\r\n\r\n", chunked);
      expect(streamed.status).toBe(413);
      expect(JSON.parse(streamed.body)).toMatchObject({ code: "PAYLOAD_TOO_LARGE" });
      // In-process (app.request) the body is a web stream: the limit is counted as it is read.
      const inProcess = await app.request("/upload", { method: "POST", headers: { "content-type": "multipart/form-data; boundary=b" }, body: part });
      expect(await inProcess.json()).toEqual({ status_code: 413, code: "PAYLOAD_TOO_LARGE", message: "Request body exceeds the limit of 4096 bytes" });
      expect(leftovers()).toEqual([]);
    } finally {
      await server.stop();
    }
  });

  it("a client that disconnects mid-upload leaves no file behind, and the server serves on", async () => {
    let handled = 0;
    const app = new App({ port: 0, bodyLimit: 64 * 1024 * 1024 });
    app.route(post("/upload", { body: z.object({ file: z.file() }), bodyType: "form", formLimits: { tmpDir: uploads } }, (ctx) => {
      handled++;
      return { size: ctx.body.file.size };
    }));
    const server = await listenOn(app);
    try {
      const boundary = "keelsonboundary";
      const socket = connect(server.port, "127.0.0.1");
      await new Promise<void>((resolve) => socket.once("connect", resolve));
      socket.write(`POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${32 * 1024 * 1024}\r\n\r\n`);
      socket.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
      const chunk = Buffer.alloc(256 * 1024, 1);
      for (let i = 0; i < 8; i++) await new Promise<void>((resolve) => socket.write(chunk, () => resolve()));
      // The file is being written: wait until it is on disk, then go away mid-upload.
      await expect.poll(() => leftovers().length, { timeout: 10_000 }).toBe(1);
      socket.destroy();
      await expect.poll(() => leftovers(), { timeout: 10_000 }).toEqual([]);
      expect(handled).toBe(0);
      const form = new FormData();
      form.append("file", new File([new Uint8Array(3 * 1024 * 1024)], "ok.bin"));
      const res = await server.fetch("/upload", { method: "POST", body: form });
      expect(await res.json()).toEqual({ size: 3 * 1024 * 1024 });
      expect(leftovers()).toEqual([]);
    } finally {
      await server.stop();
    }
  });
});

describe("form routes with async params and query schemas", () => {
  it("a query schema that rejects before the form is read still leaves no file behind", async () => {
    const app = new App({ port: 0 });
    const query = z.object({ q: z.string().refine(async () => false, "refused") });
    app.route(post("/upload", { query, body: z.object({ file: z.file() }), bodyType: "form", formLimits: { tmpDir: uploads } }, () => ({})));
    const form = new FormData();
    form.append("file", new File([new Uint8Array(512 * 1024)], "a.bin"));
    // The answer comes before the form has been read: the folder appears after it, so the test
    // watches for it rather than finding the folder not there yet.
    const created = new Set<string>();
    const watcher = watch(uploads, (_, name) => name !== null && created.add(name));
    try {
      const res = await app.request("/upload?q=x", { method: "POST", body: form });
      expect(res.status).toBe(422);
      await expect.poll(() => created.size, { timeout: 10_000 }).toBeGreaterThan(0);
      await expect.poll(() => leftovers(), { timeout: 10_000 }).toEqual([]);
    } finally {
      watcher.close();
    }
  });
});

describe("form routes in the OpenAPI document, and their options", () => {
  it("documents the body as multipart/form-data and application/x-www-form-urlencoded, files as binary", async () => {
    const app = new App({ port: 0 });
    app.route(post("/covers", { body: Cover, bodyType: "form" }, () => null));
    const doc = await (await app.request("/docs/openapi.json")).json() as {
      paths: Record<string, { post: { requestBody: { content: Record<string, { schema: { properties: Record<string, Record<string, unknown>> } }> } } }>;
    };
    const content = doc.paths["/covers"]!.post.requestBody.content;
    expect(Object.keys(content)).toEqual(["multipart/form-data", "application/x-www-form-urlencoded"]);
    expect(content["multipart/form-data"]!.schema.properties.cover).toMatchObject({ type: "string", format: "binary" });
  });

  it.each([
    [{ bodyType: "xml" }, /POST \/x: bodyType must be "json" or "form", got "xml"/],
    [{ bodyLimit: 0 }, /POST \/x: bodyLimit must be an integer number of bytes >= 1, got 0/],
    [{ bodyLimit: Number.NaN }, /bodyLimit .* got NaN/],
    [{ bodyType: "form", formLimits: { files: -1 } }, /POST \/x: formLimits.files must be an integer >= 0, got -1/],
    [{ bodyType: "form", formLimits: { fileSize: 1.5 } }, /formLimits.fileSize must be an integer >= 1, got 1.5/],
    [{ bodyType: "form", formLimits: { tmpDir: "" } }, /formLimits.tmpDir must be a non-empty path/],
  ])("refuses %j at registration, naming the route and the option", (options, message) => {
    const app = new App({ port: 0 });
    expect(() => app.route(post("/x", options as never, () => null))).toThrow(message);
  });
});
