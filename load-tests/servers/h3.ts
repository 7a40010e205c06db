// Bare h3 v2 on srvx: the baseline keelson builds on, so every ratio is against it.
import { H3, HTTPError, serve } from "h3";
import { announceReady, book, createdBook, HOST, isNewBook, port } from "./common.js";

const app = new H3();
app.get("/hello", () => ({ hello: "world" }));
app.get("/books/:id", (event) => book(event.context.params?.id ?? ""));
app.post("/books", async (event) => {
  const body: unknown = await event.req.json().catch(() => undefined);
  if (!isNewBook(body)) throw new HTTPError({ status: 422, message: "invalid book" });
  event.res.status = 201;
  return createdBook(body);
});
app.get("/__cpu", () => process.cpuUsage());

const listenPort = port();
// As a node:cluster worker (the cluster bench): H3_LISTEN=round-robin shares the primary's listener
// (srvx listens exclusively unless told otherwise), reuseport binds a SO_REUSEPORT listener of its own.
const listen = process.env.H3_LISTEN;
const server = serve(app, {
  port: listenPort, hostname: HOST, silent: true, gracefulShutdown: false,
  ...(listen === "reuseport" ? { reusePort: true } : listen === "round-robin" ? { node: { exclusive: false } } : {}),
});
await server.ready();
announceReady(listenPort);
