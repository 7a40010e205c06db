import { request } from "node:http";

/** One answer of `hit`: its status, body and the rate-limit headers. */
export interface Hit {
  status: number;
  retryAfter: string | undefined;
  rateLimit: string | undefined;
  body: string;
}

/** GET on a fresh connection (no agent), so a supervisor's round-robin spreads requests over its workers. */
export function hit(port: number, path = "/hit"): Promise<Hit> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path, agent: false, timeout: 20_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({
        status: res.statusCode ?? 0, body,
        retryAfter: res.headers["retry-after"] as string | undefined, rateLimit: res.headers["ratelimit"] as string | undefined,
      }));
    });
    req.on("timeout", () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** `total` requests, `parallel` at a time, each to the next of `ports` in turn. */
export async function hitMany(ports: readonly number[], total: number, parallel = 8): Promise<Hit[]> {
  const out: Hit[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < total) out.push(await hit(ports[next++ % ports.length]!));
  }));
  return out;
}
