import { defineConfig } from "vitest/config";

// Projects so the inner loop is fast: `npx vitest --project unit` runs in seconds, while
// `make test` runs unit, socket, process, browser and tooling. A file belongs to `unit` unless it is listed
// under the project of what it starts: real sockets in this process, real child processes, a browser.
// The checks of the repository's own tooling (Dockerfile, Kubernetes manifests, Makefile, Node pinning,
// the package, `keelson new`'s templates) are the files of test/tooling/, whatever they start.
const socket = [
  "app", "auth", "body", "compress", "cookies", "websockets", "forms", "h3-compat*", "integrations", "jobs", "metrics", "node-lane", "rate-limit-ipv6", "request-id", "request-logger", "response-schema", "security-headers",
  "status-line", "tracing", "validation",
];
const process = [
  "bundle", "cli-*", "client", "lazy-packages", "docs-memory", "docs-page", "example-cluster", "example-config", "fleet", "h3-streams-process", "jobs-*", "lifecycle-*",
  "idempotency-*", "load-shed-process", "logger", "metrics-cluster", "metrics-merge", "openapi-lint", "rate-limit-cluster", "rate-limit-redis", "rate-limit-sql",
  "repository-contract", "request-id-cluster", "sql-*", "streams-cluster", "streams-postgres", "streams-process", "streams-replay", "supervisor*", "tracing-exit", "uploads-process",
  "websockets-process",
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
      { extends: true, test: { name: "unit", include: ["test/**/*.test.ts"], exclude: [...files([...socket, ...process, ...browser]), "test/tooling/**"] } },
      { extends: true, test: { name: "socket", include: files(socket) } },
      { extends: true, test: { name: "process", include: files(process) } },
      { extends: true, test: { name: "browser", include: files(browser) } },
      { extends: true, test: { name: "tooling", include: ["test/tooling/**/*.test.ts"] } },
      // Load under autocannon with verdicts: `make scenarios`, never part of `make test`.
      { extends: true, test: { name: "scenarios", include: ["load-tests/scenarios.test.ts"], testTimeout: 180_000 } },
    ],
  },
});
