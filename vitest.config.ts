import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Process-level suites spawn real servers and send real signals: give them room on a noisy 2-core box.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
  },
});
