import { z } from "zod";
import { App, created, get, post } from "./src/index.js";
import { captureLogs } from "./test/helpers/logs.js";
const Book = z.object({ id: z.string(), title: z.string(), author: z.string() });
const NewBook = z.object({ title: z.string().min(1).max(200), author: z.string() });
function build(schemas: boolean) {
  const r = schemas ? { 200: Book, 201: Book } : undefined;
  return new App({ env: "production", logger: captureLogs("json").logger })
    .route(get("/books/:id", { responses: r }, (ctx) => ({ id: ctx.params.id, title: `Book ${ctx.params.id}`, author: "Anonymous" })))
    .route(post("/books", { body: NewBook, responses: r }, (ctx) => created({ ...ctx.body, id: "1" })));
}
const body = JSON.stringify({ title: "Dune", author: "Frank Herbert" });
for (let round = 0; round < 3; round++) for (const schemas of [false, true]) {
  const app = build(schemas);
  for (const [name, init, path] of [["GET", undefined, "/books/42"], ["POST", { method: "POST", headers: { "content-type": "application/json" }, body }, "/books"]] as const) {
    for (let i = 0; i < 3000; i++) await (await app.request(path, init as RequestInit)).text();
    const c = process.cpuUsage(); const n = 10000;
    for (let i = 0; i < n; i++) await (await app.request(path, init as RequestInit)).text();
    const u = process.cpuUsage(c);
    console.log(schemas ? "schemas" : "plain  ", name, ((u.user + u.system) / n).toFixed(2), "µs CPU/req");
  }
}
