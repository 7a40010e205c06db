/**
 * Errors of h3 hooks inside keelson (docs/h3.md, Errors): keelson sets h3's `silent`, so what h3
 * would print to the console (an `onResponse` middleware's hook that throws, an `onDispose`
 * callback that throws or rejects) is one ERROR line through keelson's logger, with the request's
 * method, path and request id. Through keelson routes and `app.httpEngine`, in-process and on a
 * socket; each expectation is h3's own behaviour unless a comment names keelson's documented difference.
 */
import { onDispose, onResponse } from "h3";
import { expect, it } from "vitest";
import { App, get } from "../src/index.js";
import { describeBoth } from "./helpers/both.js";

/** The ERROR lines of the log that mention `text`, each a whole entry (a stack included). */
function errorLines(lines: readonly string[], text: string): string[] {
  return lines.filter((line) => line.startsWith("[ERROR]") && line.includes(text));
}

describeBoth("an onResponse middleware whose hook throws", (base) => {
  const app = new App(base);
  app.use(onResponse((_response, event) => {
    if (event.url.pathname.endsWith("/hook-breaks")) throw new Error("hook broke here");
  }));
  app.route(get("/hook-breaks", () => ({ ok: true })));
  app.httpEngine.get("/engine/hook-breaks", () => ({ ok: true }));
  app.route(get("/fine", () => ({ ok: true })));
  return app;
}, (target) => {
  it("is a 500, as in h3, logged once as an error with the method, path and request id", async () => {
    for (const path of ["/hook-breaks", "/engine/hook-breaks"]) {
      target().logs.clear();
      const res = await target().fetch(path);
      expect(res.status).toBe(500);
      const body = await res.json() as { code: string; request_id: string };
      expect(body.code).toBe("INTERNAL_ERROR");
      const lines = errorLines(target().logs.lines(), "hook broke here");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(`GET ${path} failed`);
      expect(lines[0]).toContain(body.request_id);
    }
    expect((await target().fetch("/fine")).status).toBe(200);
  });
});

/** A body of one chunk, streamed. */
function streamed(): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode("streamed"));
      controller.close();
    },
  });
}

describeBoth("onDispose callbacks that throw", (base) => {
  const app = new App(base);
  const ran: string[] = [];
  const register = (event: Parameters<typeof onDispose>[0], tag: string) => {
    onDispose(event, () => {
      ran.push(`${tag} sync`);
      throw new Error(`${tag} sync boom`);
    });
    onDispose(event, async () => {
      ran.push(`${tag} async`);
      throw new Error(`${tag} async boom`);
    });
    onDispose(event, () => void ran.push(`${tag} after`));
  };
  app.route(get("/dispose", (ctx) => {
    register(ctx.event, "route");
    return { ok: true };
  }));
  app.route(get("/dispose-stream", (ctx) => {
    register(ctx.event, "route-stream");
    return streamed();
  }));
  app.httpEngine.get("/engine/dispose-stream", (event) => {
    register(event, "engine-stream");
    return streamed();
  });
  app.httpEngine.get("/engine/dispose", (event) => {
    register(event, "engine");
    return "ok";
  });
  app.httpEngine.get("/ran", () => ran.splice(0));
  return app;
}, (target) => {
  it("a streamed body: every callback runs, in order, as in h3; each failure is one error line with the path and request id", async () => {
    for (const [path, tag] of [["/dispose-stream", "route-stream"], ["/engine/dispose-stream", "engine-stream"]] as const) {
      target().logs.clear();
      const res = await target().fetch(path);
      expect(await res.text()).toBe("streamed");
      const id = res.headers.get("x-request-id")!;
      await expect.poll(() => errorLines(target().logs.lines(), "boom").length).toBe(2);
      for (const kind of ["sync", "async"]) {
        const lines = errorLines(target().logs.lines(), `${tag} ${kind} boom`);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain(`GET ${path} failed in an onDispose callback`);
        expect(lines[0]).toContain(id);
      }
      expect(await (await target().fetch("/ran")).json()).toEqual([`${tag} sync`, `${tag} async`, `${tag} after`]);
    }
  });

  it("a body that is not streamed: every callback runs; on a socket each failure is logged (in-process h3 runs them before keelson sees the response: keelson's documented difference)", async () => {
    for (const [path, tag] of [["/dispose", "route"], ["/engine/dispose", "engine"]] as const) {
      target().logs.clear();
      const res = await target().fetch(path);
      expect(res.status).toBe(200);
      await res.text();
      await expect.poll(async () => (await (await target().fetch("/ran")).json() as string[]).length === 0 ? undefined : "ran").toBe("ran");
      if (target().mode === "socket") {
        await expect.poll(() => errorLines(target().logs.lines(), `${tag} `).length).toBe(2);
        expect(errorLines(target().logs.lines(), `${tag} sync boom`)[0]).toContain(res.headers.get("x-request-id")!);
      }
    }
  });
});
