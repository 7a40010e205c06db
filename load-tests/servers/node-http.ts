// Raw node:http: the floor every framework is measured against.
import * as http from "node:http";
import { announceReady, book, collectJSONBody, createdBook, HOST, isNewBook, port } from "./common.js";

function send(res: http.ServerResponse, status: number, data: unknown): void {
  const body = JSON.stringify(data);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

function createBook(req: http.IncomingMessage, res: http.ServerResponse): void {
  collectJSONBody(req, (parsed, status, error) => {
    if (status !== undefined) return send(res, status, { error });
    if (!isNewBook(parsed)) return send(res, 422, { error: "invalid book" });
    send(res, 201, createdBook(parsed));
  });
}

const server = http.createServer((req, res) => {
  const url = req.url ?? "/";
  const queryAt = url.indexOf("?");
  const pathname = queryAt === -1 ? url : url.slice(0, queryAt);
  if (req.method === "GET") {
    if (pathname === "/hello") return send(res, 200, { hello: "world" });
    if (pathname === "/__cpu") return send(res, 200, process.cpuUsage());
    if (pathname.startsWith("/books/")) {
      const id = pathname.slice("/books/".length);
      if (id.length > 0 && !id.includes("/")) return send(res, 200, book(decodeURIComponent(id)));
    }
  } else if (req.method === "POST" && pathname === "/books") {
    return createBook(req, res);
  }
  send(res, 404, { error: "not found" });
});

const listenPort = port();
server.listen(listenPort, HOST, () => announceReady(listenPort));
