/**
 * The h3 compatibility matrix (docs/h3.md, "What works as in h3"): each public h3 utility a keelson
 * user reaches for, through a keelson route (`ctx.event`) and through `app.httpEngine`, in-process
 * (`app.request()`) and on a real socket (`describeBoth`, the shape of h3's own `describeMatrix`).
 * Each expectation is h3's own behaviour unless a comment names keelson's documented difference.
 * Body readers and proxyRequest: h3-compat-body; statuses, HTTPError headers, basicAuth,
 * assertMethod and onResponse: h3-compat-response; hook errors: h3-compat-hooks.
 */
import {
  H3, HTTPError, appendResponseHeader, createEventStream, deleteCookie, getChunkedCookie, getCookie, getQuery,
  getRequestHeader, getRouterParams, html, iterable, redirect, sendStream, serveStatic, setChunkedCookie, setCookie,
  setResponseHeader, useSession, type H3Event,
} from "h3";
import { expect, it } from "vitest";
import { App, get } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";

type Utility = (event: H3Event) => unknown;

/** Registers `handler` as a keelson route at `path` and as an httpEngine route at `/engine<path>`; returns both paths. */
function both(app: App, path: string, handler: Utility): void {
  app.route(get(path, (ctx) => handler(ctx.event)));
  app.httpEngine.get(`/engine${path}`, handler);
}

const paths = (path: string) => [path, `/engine${path}`];

const SESSION = { password: "a password of at least 32 characters, for iron", name: "sid" };
const FILES: Record<string, { body: string; type: string; mtime: Date }> = {
  "/static/hello.txt": { body: "hello, static", type: "text/plain; charset=utf-8", mtime: new Date("2026-01-02T03:04:05Z") },
  "/engine/static/hello.txt": { body: "hello, static", type: "text/plain; charset=utf-8", mtime: new Date("2026-01-02T03:04:05Z") },
};
const stat = (event: H3Event) => serveStatic(event, {
  getContents: (id) => FILES[id]?.body,
  getMeta: (id) => {
    const file = FILES[id];
    return file && { type: file.type, size: file.body.length, mtime: file.mtime };
  },
});

const params = (event: H3Event) => ({ raw: getRouterParams(event), decoded: getRouterParams(event, { decode: true }), query: getQuery(event) });

function textStream(parts: string[]): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      for (const part of parts) controller.enqueue(new TextEncoder().encode(part));
      controller.close();
    },
  });
}

describeBoth("h3 utilities in keelson routes and on httpEngine", (base) => {
  const app = new App(base);
  app.route(get("/params/:id", (ctx) => params(ctx.event)));
  app.httpEngine.get("/engine/params/:id", params);
  both(app, "/headers", (event) => {
    setResponseHeader(event, "x-out", "set");
    appendResponseHeader(event, "x-list", "a");
    appendResponseHeader(event, "x-list", "b");
    return { in: getRequestHeader(event, "x-in") ?? null };
  });
  both(app, "/cookies", (event) => {
    setCookie(event, "theme", "dark", { path: "/", httpOnly: true });
    deleteCookie(event, "old");
    return { seen: getCookie(event, "seen") ?? null };
  });
  both(app, "/chunked-cookie", (event) => {
    const given = getChunkedCookie(event, "big");
    if (given === undefined) setChunkedCookie(event, "big", "x".repeat(6000));
    return { length: given?.length ?? 0 };
  });
  both(app, "/redirect", () => redirect("/elsewhere", 301));
  both(app, "/session", async (event) => {
    const session = await useSession<{ visits?: number }>(event, SESSION);
    await session.update({ visits: (session.data.visits ?? 0) + 1 });
    return { visits: session.data.visits };
  });
  app.route(get("/static/:name", (ctx) => stat(ctx.event)));
  app.httpEngine.get("/engine/static/**", stat);
  both(app, "/send-stream", (event) => sendStream(event, textStream(["one ", "two"])));
  both(app, "/readable", () => textStream(["a", "b", "c"]));
  both(app, "/iterable", () => iterable(["x", "y", "z"]));
  both(app, "/html", () => html`<p>${"<b>"}</p>`);
  both(app, "/http-error", () => {
    throw new HTTPError({ status: 418, message: "private words", headers: { "x-teapot": "short and stout" } });
  });
  const sub = new H3().get("/hello", () => "hi from a mounted app");
  app.httpEngine.mount("/sub", sub);
  return app;
}, (target) => {
  it("getRouterParams (raw, and with decode) and getQuery with every query value, as in h3", async () => {
    for (const path of paths("/params/a%20b")) {
      const res = await target().fetch(`${path}?x=1&x=2&y=z`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ raw: { id: "a%20b" }, decoded: { id: "a b" }, query: { x: ["1", "2"], y: "z" } });
    }
  });

  it("getRequestHeader, setResponseHeader, appendResponseHeader", async () => {
    for (const path of paths("/headers")) {
      const res = await target().fetch(path, { headers: { "x-in": "given" } });
      expect(await res.json()).toEqual({ in: "given" });
      expect(res.headers.get("x-out")).toBe("set");
      expect(res.headers.get("x-list")).toBe("a, b");
      // keelson's own headers come with every response (docs/h3.md: logging, request ids).
      expect(res.headers.get("x-request-id")).toMatch(/\S/);
    }
  });

  it("setCookie, deleteCookie and getCookie", async () => {
    for (const path of paths("/cookies")) {
      const res = await target().fetch(path, { headers: { cookie: "seen=yes" } });
      expect(await res.json()).toEqual({ seen: "yes" });
      const cookies = res.headers.getSetCookie();
      expect(cookies).toContain("theme=dark; Path=/; HttpOnly");
      expect(cookies.some((cookie) => cookie.startsWith("old=; Max-Age=0"))).toBe(true);
    }
  });

  it("setChunkedCookie and getChunkedCookie round-trip a value larger than one cookie", async () => {
    for (const path of paths("/chunked-cookie")) {
      const first = await target().fetch(path);
      expect(await first.json()).toEqual({ length: 0 });
      const cookies = first.headers.getSetCookie();
      expect(cookies.length).toBeGreaterThan(2);
      const cookie = cookies.map((line) => line.split(";")[0]).join("; ");
      expect(await (await target().fetch(path, { headers: { cookie } })).json()).toEqual({ length: 6000 });
    }
  });

  it("redirect: the status and Location, as in h3", async () => {
    for (const path of paths("/redirect")) {
      const res = await target().fetch(path, { redirect: "manual" });
      expect(res.status).toBe(301);
      expect(res.headers.get("location")).toBe("/elsewhere");
    }
  });

  it("useSession: a sealed session cookie that counts visits across requests", async () => {
    for (const path of paths("/session")) {
      const first = await target().fetch(path);
      expect(await first.json()).toEqual({ visits: 1 });
      const cookie = first.headers.getSetCookie().map((line) => line.split(";")[0]).join("; ");
      expect(cookie).toMatch(/^sid=/);
      expect(await (await target().fetch(path, { headers: { cookie } })).json()).toEqual({ visits: 2 });
    }
  });

  it("serveStatic: the contents with their type, and 304 for a matching If-Modified-Since", async () => {
    for (const path of paths("/static/hello.txt")) {
      const res = await target().fetch(path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
      expect(await res.text()).toBe("hello, static");
      const since = res.headers.get("last-modified")!;
      const again = await target().fetch(path, { headers: { "if-modified-since": since } });
      expect(again.status).toBe(304);
    }
  });

  it("sendStream, a returned ReadableStream and iterable: the whole body", async () => {
    for (const [path, body] of [["/send-stream", "one two"], ["/readable", "abc"], ["/iterable", "xyz"]] as const) {
      for (const variant of paths(path)) {
        const res = await target().fetch(variant);
        expect(res.status).toBe(200);
        expect(await res.text()).toBe(body);
      }
    }
  });

  it("html: escaped markup as text/html", async () => {
    for (const path of paths("/html")) {
      const res = await target().fetch(path);
      expect(res.headers.get("content-type")).toMatch(/^text\/html/);
      expect(await res.text()).toBe("<p>&lt;b&gt;</p>");
    }
  });

  it("HTTPError: its status and headers; the body is keelson's JSON, without its message (keelson's documented difference)", async () => {
    for (const path of paths("/http-error")) {
      const res = await target().fetch(path);
      expect(res.status).toBe(418);
      expect(res.headers.get("x-teapot")).toBe("short and stout");
      const text = await res.text();
      expect(text).not.toContain("private words");
      expect(JSON.parse(text)).toMatchObject({ status_code: 418 });
    }
  });

  it("mount: an h3 app mounted on httpEngine answers under its base, with keelson's request id and log line", async () => {
    const res = await target().fetch("/sub/hello");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hi from a mounted app");
    const id = res.headers.get("x-request-id")!;
    await expect.poll(() => target().logs.lines().some((line) => line.includes("GET /sub/hello 200") && line.includes(id))).toBe(true);
  });
});

/** Reads an event stream until `done` says so; returns what was read. */
async function readUntil(body: ReadableStream<Uint8Array>, done: (text: string) => boolean): Promise<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  for (;;) {
    const { value, done: ended } = await reader.read();
    if (ended) return text;
    text += decoder.decode(value, { stream: true });
    if (done(text)) {
      reader.releaseLock();
      return text;
    }
  }
}

/** The paths of the h3 event streams whose `onClosed` callbacks ran. */
const closed: string[] = [];

describeBoth("h3's createEventStream at the App's close()", (base) => {
  const app = new App({ ...base, shutdownTimeout: 4000 });
  both(app, "/events", (event) => {
    const stream = createEventStream(event);
    stream.onClosed(() => void closed.push(event.url.pathname));
    void stream.push({ event: "hello", data: "first" });
    return stream;
  });
  return app;
}, (target) => {
  it("each stream gets h3's events, then at close() the final event with retry: and the end; h3's onClosed runs", async () => {
    const bodies = await Promise.all(paths("/events").map(async (path) => {
      const res = await target().fetch(path);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("text/event-stream");
      const body = res.body!;
      expect(await readUntil(body, (text) => text.includes("data: first\n\n"))).toBe("event: hello\ndata: first\n\n");
      return body;
    }));
    const report = await target().app.close();
    expect(report.clean).toBe(true);
    for (const body of bodies) {
      expect(await readUntil(body, () => false)).toBe('event: shutdown\nretry: 1000\ndata: {"reconnect":true}\n\n');
    }
    await expect.poll(() => closed.toSorted()).toEqual(["/engine/events", "/events"]);
    closed.length = 0;
    expect(target().logs.lines().filter((line) => / GET \/(engine\/)?events 200 /.test(line))).toHaveLength(2);
  });
});
