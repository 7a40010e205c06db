/**
 * A JSON body the client stops sending (Content-Length promises more, then the connection is gone),
 * over a raw socket: the request is the client's failure (a 400 request line at WARN), never a 500
 * with an ERROR line, whether the body is read at once or after an async middleware has let the
 * first bytes wait in the stream's buffer.
 */
import { connect } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { App, post } from "../src/index.js";
import { listenOn, type Listening } from "./helpers/listen.js";
import { captureLogs, requestLine } from "./helpers/logs.js";

let server: Listening | undefined;
afterEach(async () => {
  await server?.stop();
  server = undefined;
});

const JSON_HEAD = "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"title\":\"Du";
const FORM_HEAD = 'Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 1000\r\n\r\n--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nDu';

/** Sends the head and part of the body, waits until the server has them, then resets the connection. */
async function sendTruncated(port: number, rest: string): Promise<void> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  socket.write(`POST /books HTTP/1.1\r\nHost: x\r\n${rest}`);
  await delay(100);
  socket.destroy();
}

describe("a body cut short by the client", () => {
  it.each([
    ["JSON, read at once", 0, false],
    ["JSON, read after an async middleware (the first bytes wait in the buffer, the client is gone)", 300, false],
    ["a form, read at once", 0, true],
    ["a form, read after an async middleware", 300, true],
  ])("is a 400 request line at WARN, with no ERROR line: %s", async (_, wait, form) => {
    const logs = captureLogs();
    const app = new App({ port: 0, logger: logs.logger });
    if (wait > 0) app.use(async (_ctx, next) => {
      await delay(wait);
      return next();
    });
    let handled = 0;
    app.route(post("/books", { body: z.object({ title: z.string() }), bodyType: form ? "form" : "json" }, () => {
      handled++;
      return {};
    }));
    server = await listenOn(app);
    await sendTruncated(server.port, form ? FORM_HEAD : JSON_HEAD);
    await expect.poll(() => logs.lines().some((line) => / POST \/books \d{3} /.test(line)), { timeout: 10_000 }).toBe(true);
    const lines = logs.lines();
    expect(lines.filter((line) => line.includes("POST /books"))).toEqual([expect.stringMatching(requestLine("WARN", "POST", "/books", 400))]);
    expect(lines.filter((line) => line.startsWith("[ERROR]"))).toEqual([]);
    expect(handled).toBe(0);
    // And the server serves on.
    const body = form ? new URLSearchParams({ title: "Dune" }) : JSON.stringify({ title: "Dune" });
    expect((await server.fetch("/books", { method: "POST", headers: form ? {} : { "content-type": "application/json" }, body })).status).toBe(200);
  });
});
