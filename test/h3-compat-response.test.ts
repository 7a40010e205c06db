/**
 * h3's ways of shaping a response, and its errors, inside keelson (docs/h3.md): statuses set on
 * `event.res`, the headers an HTTPError carries, h3's `basicAuth` and `assertMethod`, an error whose
 * cause is an HTTPError, and keelson's 404/405 contract with h3's `onResponse` middleware installed.
 * Through keelson routes and `app.httpEngine`, in-process and on a socket; each expectation is h3's
 * own behaviour unless a comment names keelson's documented difference.
 */
import { assertMethod, basicAuth, HTTPError, onResponse, setResponseHeader, setResponseStatus } from "h3";
import { expect, it } from "vitest";
import { App, created, del, get, post } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";

describeBoth("statuses set on event.res", (base) => {
  const app = new App(base);
  app.route(post("/accepted", (ctx) => {
    setResponseStatus(ctx.event, 202);
    return { queued: true };
  }));
  app.route(post("/accepted-empty", (ctx) => {
    setResponseStatus(ctx.event, 202);
  }));
  app.route(get("/res-status", async (ctx) => {
    ctx.event.res.status = 203;
    ctx.event.res.headers.set("x-from-handler", "1");
    return [1, 2];
  }));
  app.route(del("/plain-empty", () => undefined));
  app.route(post("/created-wins", (ctx) => {
    setResponseStatus(ctx.event, 202);
    return created({ id: 1 }, "/things/1");
  }));
  app.httpEngine.post("/engine/accepted", (event) => {
    setResponseStatus(event, 202);
    return { queued: true };
  });
  return app;
}, (target) => {
  it("setResponseStatus(202) then an object: 202 with the JSON body, as in h3", async () => {
    for (const path of ["/accepted", "/engine/accepted"]) {
      const res = await target().fetch(path, { method: "POST" });
      expect(res.status).toBe(202);
      expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
      expect(await res.json()).toEqual({ queued: true });
    }
  });

  it("setResponseStatus(202) then undefined: 202 with an empty body, as in h3 (keelson's 204 only when no status was set)", async () => {
    const res = await target().fetch("/accepted-empty", { method: "POST" });
    expect(res.status).toBe(202);
    expect(await res.text()).toBe("");
    expect((await target().fetch("/plain-empty", { method: "DELETE" })).status).toBe(204);
  });

  it("event.res.status and event.res.headers set directly, from an async handler", async () => {
    const res = await target().fetch("/res-status");
    expect(res.status).toBe(203);
    expect(res.headers.get("x-from-handler")).toBe("1");
    expect(await res.json()).toEqual([1, 2]);
  });

  it("created() keeps its own 201 over setResponseStatus, as an h3 HTTPResponse with a status does", async () => {
    const res = await target().fetch("/created-wins", { method: "POST" });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe("/things/1");
  });
});

describeBoth("the headers an HTTPError carries", (base) => {
  const app = new App(base);
  app.route(get("/basic", { middleware: [basicAuth({ username: "ada", password: "s3cret", realm: "books" })] }, () => ({ ok: true })));
  app.route(get("/assert-method", (ctx) => {
    assertMethod(ctx.event, ["POST", "PUT"]);
    return {};
  }));
  app.route(get("/retry", () => {
    throw new HTTPError({ status: 503, message: "down for secret reasons", data: { secret: 1 }, headers: { "retry-after": "30", "x-custom": "yes", "content-type": "text/html" } });
  }));
  app.route(get("/cause-400", () => {
    class CustomError extends Error {
      override cause = new HTTPError({ status: 400, statusText: "Bad Request", unhandled: true });
    }
    throw new HTTPError(new CustomError());
  }));
  app.route(get("/status-property", () => {
    throw Object.assign(new Error("upstream said 404"), { status: 404 });
  }));
  app.httpEngine.get("/engine/basic", () => ({ ok: true }), { middleware: [basicAuth({ username: "ada", password: "s3cret" })] });
  return app;
}, (target) => {
  it("h3's basicAuth 401 carries WWW-Authenticate, on a keelson route and on httpEngine", async () => {
    for (const path of ["/basic", "/engine/basic"]) {
      const res = await target().fetch(path);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toMatch(/^Basic realm="(books|auth)", charset="UTF-8"$/);
      expect((await res.json()).code).toBe("UNAUTHORIZED");
    }
    const ok = await target().fetch("/basic", { headers: { authorization: `Basic ${btoa("ada:s3cret")}` } });
    expect(ok.status).toBe(200);
  });

  it("assertMethod's 405 carries Allow", async () => {
    const res = await target().fetch("/assert-method");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST, PUT");
    expect((await res.json()).code).toBe("METHOD_NOT_ALLOWED");
  });

  it("any header set on an HTTPError reaches the response; its message and data stay private, the body stays keelson's JSON", async () => {
    const res = await target().fetch("/retry");
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("30");
    expect(res.headers.get("x-custom")).toBe("yes");
    expect(res.headers.get("content-type")).toBe("application/json;charset=UTF-8");
    const text = await res.text();
    expect(text).not.toContain("secret");
    expect(JSON.parse(text).code).toBe("SERVICE_UNAVAILABLE");
  });

  it("an error whose cause is a 400 HTTPError answers 400, as in h3, and is logged as unhandled", async () => {
    const res = await target().fetch("/cause-400");
    expect(res.status).toBe(400);
    expect((await res.json()).code).toBe("BAD_REQUEST");
    expect(target().logs.lines().some((line) => line.startsWith("[ERROR]") && line.includes("GET /cause-400 failed"))).toBe(true);
  });

  it("an Error with a status property is a 500 (keelson's documented difference: h3 answers its status)", async () => {
    const res = await target().fetch("/status-property");
    expect(res.status).toBe(500);
  });
});

for (const via of ["app.use", "app.httpEngine.use"] as const) {
  describeBoth(`keelson's 404 and 405 with an h3 onResponse middleware (${via})`, (base) => {
    const app = new App(base);
    const seen: number[] = [];
    const middleware = onResponse((response) => {
      seen.push(response.status);
    });
    if (via === "app.use") app.use(middleware);
    else app.httpEngine.use(middleware);
    app.route(get("/books", () => [{ id: 1 }]));
    app.httpEngine.get("/seen", () => seen.splice(0));
    return app;
  }, (target) => {
    it("an unmatched path gets keelson's 404 JSON, with no query string in it, and the hook sees it", async () => {
      const res = await target().fetch("/nope?token=s3cret");
      expect(res.status).toBe(404);
      const text = await res.text();
      expect(text).not.toContain("s3cret");
      expect(JSON.parse(text)).toEqual({ status_code: 404, code: "NOT_FOUND", message: expect.any(String) });
      expect(await (await target().fetch("/seen")).json()).toEqual([404]);
    });

    it("a wrong method gets keelson's 405 with Allow", async () => {
      const res = await target().fetch("/books", { method: "POST" });
      expect(res.status).toBe(405);
      expect(res.headers.get("allow")).toBe("GET, HEAD");
      expect((await res.json()).code).toBe("METHOD_NOT_ALLOWED");
    });

    it("a matched route and HEAD still go through", async () => {
      expect((await target().fetch("/books")).status).toBe(200);
      expect((await target().fetch("/books", { method: "HEAD" })).status).toBe(200);
    });
  });
}

describeBoth("errors of h3 hooks", (base) => {
  const app = new App(base);
  app.httpEngine.config.onResponse = () => {
    throw new Error("hook broke");
  };
  app.route(get("/fine", (ctx) => {
    setResponseHeader(ctx.event, "x-ok", "1");
    return { ok: true };
  }));
  return app;
}, (target) => {
  it("a throwing config.onResponse hook is logged through keelson's logger; the response still goes out", async () => {
    const res = await target().fetch("/fine");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    await expect.poll(() => target().logs.lines().some((line) => line.startsWith("[ERROR]") && line.includes("onResponse") && line.includes("hook broke"))).toBe(true);
  });
});
