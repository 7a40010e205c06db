// h3's cookie helpers work in keelson handlers, on every kind of result: what docs/routing.md#cookies
// says, in-process and over a real socket.
import { deleteCookie, getCookie, setCookie } from "h3";
import { expect, it } from "vitest";
import { App, created, get, noContent, post } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";

function buildCookieApp(base: ConstructorParameters<typeof App>[0]): App {
  const app = new App(base);
  app.route(post("/login", (ctx) => {
    setCookie(ctx.event, "session", "s-42", { httpOnly: true, secure: true, sameSite: "lax", path: "/", maxAge: 3600 });
    return created({ ok: true });
  }));
  app.route(get("/me", (ctx) => {
    const session = getCookie(ctx.event, "session");
    setCookie(ctx.event, "seen", "1", { path: "/" });
    return { session: session ?? null };
  }));
  app.route(post("/logout", (ctx) => {
    deleteCookie(ctx.event, "session", { path: "/" });
    return noContent();
  }));
  app.route(get("/fail", (ctx) => {
    setCookie(ctx.event, "attempt", "1");
    throw new Error("boom");
  }));
  return app;
}

describeBoth("cookies with h3's getCookie / setCookie", buildCookieApp, (t) => {
  it("setCookie on a 201 sends Set-Cookie with its attributes", async () => {
    const res = await t().fetch("/login", { method: "POST" });
    expect(res.status).toBe(201);
    expect(res.headers.getSetCookie()).toEqual(["session=s-42; Max-Age=3600; Path=/; HttpOnly; Secure; SameSite=Lax"]);
  });

  it("getCookie reads the request's Cookie header; a plain object result keeps the Set-Cookie", async () => {
    const res = await t().fetch("/me", { headers: { cookie: "theme=dark; session=s-42" } });
    expect(await res.json()).toEqual({ session: "s-42" });
    expect(res.headers.getSetCookie()).toEqual(["seen=1; Path=/"]);
    const anonymous = await t().fetch("/me");
    expect(await anonymous.json()).toEqual({ session: null });
  });

  it("deleteCookie on a 204 expires the cookie", async () => {
    const res = await t().fetch("/logout", { method: "POST", headers: { cookie: "session=s-42" } });
    expect(res.status).toBe(204);
    expect(res.headers.getSetCookie()).toEqual([expect.stringMatching(/^session=; Max-Age=0; Path=\/$/)]);
  });

  it("a cookie set before a failure still goes out with the error response (as docs/routing.md warns)", async () => {
    const res = await t().fetch("/fail");
    expect(res.status).toBe(500);
    expect(res.headers.getSetCookie()).toEqual(["attempt=1; Path=/"]);
  });
});
