// Does scraping /metrics move request latency? The supervisor runs 2 workers of
// test/fixtures/metrics-cluster-app.ts; autocannon loads GET /hello in phases that alternate
// between no scraping and a scrape every --interval ms (default 250, 60x Prometheus' default).
//
//   node --import tsx load-tests/metrics-scrape.ts [--pairs 4] [--seconds 5] [--interval 250]
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import autocannon, { type Result } from "autocannon";

const { values } = parseArgs({ options: {
  pairs: { type: "string", default: "4" }, seconds: { type: "string", default: "5" }, interval: { type: "string", default: "250" },
} });
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const port = 20_000 + Math.floor(Math.random() * 40_000);
const url = `http://127.0.0.1:${port}`;
const supervisor = spawn(process.execPath, ["--import", "tsx", "supervisor/cli.ts", "start", "test/fixtures/metrics-cluster-app.ts",
  "--workers", "2", "--port", String(port)], { cwd: ROOT, env: { ...process.env, NODE_ENV: "production" }, stdio: ["ignore", "ignore", "inherit"] });

async function waitUntilServing(): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${url}/hello`)).ok) return;
    } catch {
      if (Date.now() > deadline) throw new Error("the supervisor did not start");
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function phase(scrape: boolean) {
  const state = { stop: false };
  const took: number[] = [];
  const scraper = (async () => {
    if (!scrape) return;
    while (!state.stop) {
      const started = performance.now();
      await (await fetch(`${url}/metrics`)).text();
      took.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, Number(values.interval)));
    }
  })();
  const result = await new Promise<Result>((resolve, reject) => {
    autocannon({ url: `${url}/hello`, connections: 20, duration: Number(values.seconds) }, (error, done) => (error ? reject(error) : resolve(done)));
  });
  state.stop = true;
  await scraper;
  const { p50, p90, p99, max } = result.latency;
  const scrapeMs = took.length === 0 ? "—" : (took.reduce((a, b) => a + b, 0) / took.length).toFixed(1);
  return `| ${scrape ? `scrape / ${values.interval} ms` : "no scrape"} | ${Math.round(result.requests.average)} | ${p50} | ${p90} | ${p99} | ${max} | ${took.length} | ${scrapeMs} |`;
}

try {
  await waitUntilServing();
  await phase(false);
  console.log("| phase | req/s | p50 | p90 | p99 | max | scrapes | mean scrape ms |\n| --- | --- | --- | --- | --- | --- | --- | --- |");
  for (let pair = 0; pair < Number(values.pairs); pair++) {
    console.log(await phase(false));
    console.log(await phase(true));
  }
} finally {
  supervisor.kill("SIGTERM");
}
