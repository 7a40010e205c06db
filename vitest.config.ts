import { defineConfig } from "vitest/config";

// Projects so the inner loop is fast: `npx vitest --project unit` runs in seconds, while
// `make test` runs unit, socket, process and browser. A file belongs to `unit` unless it is listed under
// the project of what it starts: real sockets in this process, real child processes, a browser.
const socket = [
  "app", "auth", "cookies", "forms", "integrations", "jobs", "metrics", "rate-limit-ipv6", "request-id", "request-logger", "security-headers", "status-line",
  "tracing", "validation",
];
const process = [
  "bundle", "client", "deploy-dockerfile", "deploy-start", "docs-memory", "docs-page", "example-cluster", "example-config", "fleet", "jobs-*", "lifecycle-*",
  "load-shed-process", "logger", "metrics-cluster", "metrics-merge", "new-project", "node-version", "package", "rate-limit-cluster", "rate-limit-redis", "rate-limit-sql",
  "repository-contract", "request-id-cluster", "sql-*", "streams-cluster", "streams-postgres", "streams-process", "supervisor*", "tracing-exit",
];
const browser = ["browser-*"];
const files = (names: string[]) => names.map((name) => `test/${name}.test.ts`);

export default defineConfig({
  test: {
    // Process-level suites spawn real servers and send real signals: give them room on a noisy 2-core box.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    projects: [
      { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: files([...socket, ...process, ...browser]) } },
      { extends: true, test: { name: "socket", include: files(socket) } },
      { extends: true, test: { name: "process", include: files(process) } },
      { extends: true, test: { name: "browser", include: files(browser) } },
      // Load under autocannon with verdicts: `make scenarios`, never part of `make test`.
      { extends: true, test: { name: "scenarios", include: ["load-tests/scenarios.test.ts"], testTimeout: 180_000 } },
    ],
  },
});
