// Minimal HTTP client for control requests (CPU probes, checks, cold-start polling).
// It never reuses connections, so a probe can't queue behind benchmark traffic or
// keep the server alive after SIGTERM.
import * as http from "node:http";

export interface SimpleResponse {
  status: number;
  body: string;
}

export function request(
  url: string,
  options: { method?: string; body?: string; timeoutMs?: number; agent?: http.Agent } = {},
): Promise<SimpleResponse> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(options.body));
    }
    if (options.agent === undefined) headers.connection = "close";
    const req = http.request(url, { method: options.method ?? "GET", headers, agent: options.agent ?? false });
    req.setTimeout(options.timeoutMs ?? 2_000, () => req.destroy(new Error(`timeout on ${url}`)));
    req.on("error", reject);
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
    });
    req.end(options.body);
  });
}

export interface CpuUsage {
  user: number;
  system: number;
}

export async function cpuUsage(origin: string): Promise<CpuUsage> {
  const res = await request(`${origin}/__cpu`, { timeoutMs: 5_000 });
  const parsed: unknown = JSON.parse(res.body);
  if (res.status !== 200 || typeof parsed !== "object" || parsed === null) {
    throw new Error(`GET /__cpu answered ${res.status}: ${res.body.slice(0, 200)}`);
  }
  const { user, system } = parsed as Record<string, unknown>;
  if (typeof user !== "number" || typeof system !== "number") {
    throw new Error(`GET /__cpu must return {user, system} in µs, got ${res.body.slice(0, 200)}`);
  }
  return { user, system };
}

export { delay as sleep } from "../../harness/child.js";
