// hono on @hono/node-server, with a plain hand-written body check.
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { announceReady, book, createdBook, HOST, isNewBook, port } from "./common.js";

const app = new Hono();
app.get("/hello", (c) => c.json({ hello: "world" }));
app.get("/books/:id", (c) => c.json(book(c.req.param("id"))));
app.post("/books", async (c) => {
  const body: unknown = await c.req.json().catch(() => undefined);
  if (!isNewBook(body)) return c.json({ error: "invalid book" }, 422);
  return c.json(createdBook(body), 201);
});
app.get("/__cpu", (c) => c.json(process.cpuUsage()));

const listenPort = port();
serve({ fetch: app.fetch, port: listenPort, hostname: HOST }, () => announceReady(listenPort));
