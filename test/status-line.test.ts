// The raw status line over a real socket: node writes whatever reason phrase it is given.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { App, get, json } from "../src/index.js";
import { listenOn, type Listening } from "./helpers/listen.js";
import { captureLogs } from "./helpers/logs.js";

/** Sends `GET path` on a fresh connection and resolves with the first line of the answer. */
function statusLine(port: number, path: string, method = "GET"): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    const socket = connect(port, "127.0.0.1", () => socket.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`));
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      text += chunk;
      const end = text.indexOf("\r\n");
      if (end === -1) return;
      socket.destroy();
      resolve(text.slice(0, end));
    });
    socket.on("error", reject);
  });
}

describe("status lines (real socket)", () => {
  let server: Listening;
  beforeAll(async () => {
    const app = new App({ port: 0, logger: captureLogs().logger });
    app.route(get("/ok", () => ({ ok: true })));
    app.route(get("/created", () => json({ id: 1 }, 201)));
    app.route(get("/custom", () => new Response("x", { status: 299, statusText: "Fine Really" })));
    app.route(get("/boom", () => {
      throw new Error("internal detail");
    }));
    server = await listenOn(app);
  });
  afterAll(() => server.stop());

  it.each([
    ["/ok", "GET", "HTTP/1.1 200 OK"],
    ["/created", "GET", "HTTP/1.1 201 Created"],
    ["/missing", "GET", "HTTP/1.1 404 Not Found"],
    ["/ok", "DELETE", "HTTP/1.1 405 Method Not Allowed"],
    ["/boom", "GET", "HTTP/1.1 500 Internal Server Error"],
    ["/ok", "HEAD", "HTTP/1.1 200 OK"],
    ["/docs/scalar.js", "GET", "HTTP/1.1 200 OK"],
  ])("%s (%s) carries the standard reason phrase", async (path, method, line) => {
    expect(await statusLine(server.port, path, method)).toBe(line);
  });

  it("keeps a reason phrase the handler chose", async () => {
    expect(await statusLine(server.port, "/custom")).toBe("HTTP/1.1 299 Fine Really");
  });
});
