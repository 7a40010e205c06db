/**
 * End to end: the example service runs as a real process, headless Chromium (Debian's, never a
 * downloaded one) opens its /docs page, and every request the page makes is recorded. The page
 * must render the example's operations from 127.0.0.1 alone: Chromium runs with DNS resolution
 * disabled for every other host, so a call out would also fail to load, not just be counted.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const CHROMIUM = "/usr/bin/chromium";
const OPERATIONS = ["List books", "Add a book", "Get one book", "Replace a book", "Delete a book"];

/** Starts the bookstore on a free port; resolves with its base URL once it logs that it listens. */
function startBookstore(): { child: ChildProcess; ready: Promise<string>; output: () => string } {
  const child = spawn(process.execPath, ["--import", "tsx", "examples/bookstore/main.ts"], {
    cwd: ROOT, env: { ...process.env, PORT: "0", NODE_ENV: "development" }, stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const ready = new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      const port = /listening on \S*?:(\d+)/.exec(output)?.[1];
      if (port) resolve(`http://127.0.0.1:${port}`);
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`bookstore exited (${code}) before listening:\n${output}`)));
  });
  return { child, ready, output: () => output };
}

describe("the docs page in a real browser", () => {
  let service: ReturnType<typeof startBookstore>;
  let base: string;
  let profile: string;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    service = startBookstore();
    profile = await mkdtemp(join(tmpdir(), "keelson-chromium-"));
    base = await service.ready;
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    if (service.child.exitCode === null) {
      const exited = new Promise((resolve) => service.child.once("exit", resolve));
      service.child.kill("SIGTERM");
      await exited;
    }
    await rm(profile, { recursive: true, force: true });
  }, 30_000);

  it("renders the example's operations with no request leaving 127.0.0.1", async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get update && apt-get install -y chromium (.ci/run does this)`).toBe(true);
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
      ],
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const requests: string[] = [];
    const failures: string[] = [];
    const errors: string[] = [];
    page.on("request", (request) => requests.push(request.url()));
    page.on("requestfailed", (request) => failures.push(`${request.url()}: ${request.failure()?.errorText}`));
    page.on("pageerror", (error) => errors.push(error.message));
    // Chromium reports a blocked resource, style or script as a console error naming the
    // Content Security Policy; warnings and errors of any kind fail the case.
    const messages: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") messages.push(`${message.type()}: ${message.text()}`);
    });
    await page.exposeFunction("keelsonCSPViolation", (text: string) => messages.push(`securitypolicyviolation: ${text}`));
    await page.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (event) => {
        const report = (window as unknown as { keelsonCSPViolation(text: string): void }).keelsonCSPViolation;
        report(`${event.violatedDirective} blocked ${event.blockedURI || "inline"} (${event.sample}) at ${event.sourceFile}:${event.lineNumber}:${event.columnNumber}`);
      });
    });

    const response = await page.goto(`${base}/docs`);
    expect(response?.status()).toBe(200);
    const headers = response!.headers();
    expect(headers["content-security-policy"]).toMatch(/^default-src 'self'; script-src 'self' 'sha256-[A-Za-z0-9+/]+=*';/);
    expect(headers["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(headers).toMatchObject({ "x-content-type-options": "nosniff", "x-frame-options": "DENY", "referrer-policy": "no-referrer" });
    for (const summary of OPERATIONS) {
      await expect.poll(() => page.getByText(summary, { exact: true }).first().isVisible(), { timeout: 30_000 }).toBe(true);
    }
    await expect.poll(() => page.getByText("Bookstore API", { exact: true }).first().isVisible(), { timeout: 10_000 }).toBe(true);
    // Give late requests (fonts, telemetry, lazy chunks) their chance to show up before counting.
    await page.waitForLoadState("networkidle");

    const paths = requests.map((url) => new URL(url)).filter((url) => url.protocol.startsWith("http")).map((url) => url.pathname);
    expect(paths).toEqual(expect.arrayContaining(["/docs", "/docs/scalar.js", "/docs/openapi.json"]));
    const outside = requests.filter((url) => {
      const { protocol, hostname } = new URL(url);
      // data: and blob: URLs never leave the page; everything else must be the service itself.
      return protocol !== "data:" && protocol !== "blob:" && hostname !== "127.0.0.1";
    });
    expect(outside).toEqual([]);
    expect(failures).toEqual([]);
    expect(errors).toEqual([]);
    expect(messages).toEqual([]);
  }, 90_000);

  it("sends a Test request to the API itself under the page's CSP", async () => {
    expect(context, "the first case launches the browser").toBeDefined();
    const page = await context!.newPage();
    const messages: string[] = [];
    page.on("console", (message) => {
      if (message.type() === "error" || message.type() === "warning") messages.push(`${message.type()}: ${message.text()}`);
    });
    await page.goto(`${base}/docs`);
    await expect.poll(() => page.getByText("List books", { exact: true }).first().isVisible(), { timeout: 30_000 }).toBe(true);
    await page.getByRole("button", { name: /test request/i }).first().click();
    const answer = page.waitForResponse((response) => new URL(response.url()).pathname === "/api/books", { timeout: 30_000 });
    await page.getByRole("button", { name: /^send/i }).first().click();
    expect((await answer).status()).toBe(200);
    expect(messages).toEqual([]);
    await page.close();
  }, 60_000);

  it("sends an authenticated Test request with the token make token prints: 401 without it, accepted with it", async () => {
    expect(context, "the first case launches the browser").toBeDefined();
    const token = execFileSync(process.execPath, ["--import", "tsx", "examples/bookstore/token.ts"], { cwd: ROOT, encoding: "utf8" }).trim();
    const page = await context!.newPage();
    const answers: Array<{ status: number; authorization: string | undefined }> = [];
    page.on("response", (response) => {
      if (new URL(response.url()).pathname === "/api/books" && response.request().method() === "POST") {
        answers.push({ status: response.status(), authorization: response.request().headers().authorization });
      }
    });
    await page.goto(`${base}/docs`);
    await expect.poll(() => page.getByText("Add a book", { exact: true }).first().isVisible(), { timeout: 30_000 }).toBe(true);
    await page.getByRole("button", { name: /test request\s*\(post \/api\/books\)/i }).click();
    await page.getByRole("button", { name: /^send/i }).first().click();
    await expect.poll(() => answers.length, { timeout: 30_000 }).toBe(1);
    await page.getByRole("button", { name: /^Authentication Required/ }).click();
    await page.getByPlaceholder("Token").fill(token);
    await page.getByRole("button", { name: /^send/i }).first().click();
    await expect.poll(() => answers.length, { timeout: 30_000 }).toBe(2);
    // Scalar's sample body has an empty title: past authentication, validation answers 422.
    expect(answers).toEqual([{ status: 401, authorization: expect.not.stringContaining(".") }, { status: 422, authorization: `Bearer ${token}` }]);
    await page.close();
  }, 60_000);

  it("renders at the docs path with a trailing slash too (script and document resolve against the page)", async () => {
    expect(context, "the first case launches the browser").toBeDefined();
    const page = await context!.newPage();
    const requests: string[] = [];
    page.on("request", (request) => requests.push(new URL(request.url()).pathname));
    expect((await page.goto(`${base}/docs/`))?.status()).toBe(200);
    await expect.poll(() => page.getByText("List books", { exact: true }).first().isVisible(), { timeout: 30_000 }).toBe(true);
    expect(requests).toEqual(expect.arrayContaining(["/docs/", "/docs/scalar.js", "/docs/openapi.json"]));
    await page.close();
  }, 60_000);
});
