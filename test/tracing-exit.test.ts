import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { killAllChildren, spawnChild } from "../harness/child.js";

// The example service with OTEL_EXPORTER_OTLP_ENDPOINT pointing at a fake OTLP/HTTP collector:
// spans wait in the batch processor until SIGTERM's shutdown hook flushes them.
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const servers = new Set<Server>();

afterEach(() => {
  killAllChildren();
  for (const server of servers) server.close();
  servers.clear();
});

interface OtlpSpan {
  name: string;
  traceId: string;
  kind: number;
  attributes: Array<{ key: string; value: Record<string, unknown> }>;
}

/** A collector that accepts OTLP/HTTP JSON on /v1/traces and keeps every span. */
async function startCollector(): Promise<{ url: string; spans: OtlpSpan[]; services: Set<string> }> {
  const spans: OtlpSpan[] = [];
  const services = new Set<string>();
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => {
      if (req.url === "/v1/traces") {
        const payload = JSON.parse(body) as { resourceSpans: Array<{ resource: { attributes: OtlpSpan["attributes"] }; scopeSpans: Array<{ spans: OtlpSpan[] }> }> };
        for (const resourceSpans of payload.resourceSpans) {
          const name = resourceSpans.resource.attributes.find((a) => a.key === "service.name")?.value.stringValue;
          if (typeof name === "string") services.add(name);
          for (const scope of resourceSpans.scopeSpans) spans.push(...scope.spans);
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  servers.add(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, services };
}

describe("spans at exit (the example service, a real process and SIGTERM)", () => {
  it("exports every request's server span before exiting 0, and the log lines carry their trace ids", async () => {
    const collector = await startCollector();
    const child = spawnChild([process.execPath, "--import", "tsx", "examples/bookstore/main.ts"], {
      cwd: ROOT,
      env: { NODE_ENV: "production", PORT: "0", OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_SERVICE_NAME: "bookstore-test",
        // Longer than the test: only the shutdown hook can have exported them.
        OTEL_BSP_SCHEDULE_DELAY: "120000" },
    });
    const port = Number(/listening on http:\/\/[^\s"]+:(\d+)/.exec(await child.waitFor(/listening on/))?.[1]);

    const paths = ["/hello", "/api/books", "/api/books/1", "/nope", "/hello?name=Ada"];
    const requests = 25;
    for (let i = 0; i < requests; i++) {
      // A request the example's load shedding turns away (503 "overloaded") is answered before any
      // routing, logging or span: on a loaded test machine the event loop can run late, so it is
      // sent again after its Retry-After, as a client would; every request served has its span.
      for (let attempt = 1; ; attempt++) {
        const response = await fetch(`http://127.0.0.1:${port}${paths[i % paths.length]}`);
        const text = await response.text();
        if (response.status !== 503 || !text.includes("the service is overloaded") || attempt === 10) break;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
    // Nothing exported yet: the batch processor waits, the shutdown hook must flush.
    expect(collector.spans).toHaveLength(0);
    child.kill("SIGTERM");
    expect((await child.exited).code).toBe(0);

    const server = collector.spans.filter((span) => span.kind === 2);
    expect(server).toHaveLength(requests);
    expect(new Set(server.map((s) => s.name))).toEqual(new Set(["GET /hello", "GET /api/books", "GET /api/books/:id", "GET"]));
    expect(collector.services).toEqual(new Set(["bookstore-test"]));
    const logged = child.lines().filter((line) => line.startsWith("{") && line.includes("\"method\""))
      .map((line) => (JSON.parse(line) as { trace_id?: string }).trace_id);
    expect(logged).toHaveLength(requests);
    expect(new Set(logged)).toEqual(new Set(server.map((s) => s.traceId)));
  });
});
