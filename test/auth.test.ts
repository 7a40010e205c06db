/**
 * keelson/auth: bearer JWT, API key and basic authentication, each case through `app.request()`
 * and a real socket; the JWKS cases against a real JWKS server on loopback.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import { SignJWT, UnsecuredJWT, exportJWK, type JWK } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { App, get, post } from "../src/index.js";
import { apiKeyAuth, basicAuth, jwtAuth, type AuthInfo } from "../src/entries/auth.js";
import { describeBoth } from "./helpers/both.js";
import { limitHits } from "../src/limit-hits.js";

const SECRET = "a-development-secret-of-32-bytes!";
const OTHER_SECRET = "another-secret-that-is-32-bytes!!";
const key = new TextEncoder().encode(SECRET);
const now = () => Math.floor(Date.now() / 1000);

function sign(claims: Record<string, unknown>, options: { secret?: string; alg?: string; iat?: number } = {}): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: options.alg ?? "HS256" }).setIssuedAt(options.iat ?? now())
    .sign(new TextEncoder().encode(options.secret ?? SECRET));
}
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}` });

describeBoth(
  "jwtAuth with a shared secret",
  (base) => {
    const app = new App(base);
    const reader = jwtAuth({ secret: SECRET, issuer: "https://issuer.test", audience: "books" });
    const writer = jwtAuth({ secret: SECRET, issuer: "https://issuer.test", audience: "books", scopes: ["books:write"] });
    const lenient = jwtAuth({ secret: SECRET, clockTolerance: 30 });
    const hs256 = jwtAuth({ secret: SECRET, algorithms: ["HS256"] });
    app.group("/api", reader).route(get("/me", (ctx) => ({ auth: ctx.auth })));
    app.route(post("/books", (ctx) => ({ subject: ctx.auth?.subject, scopes: ctx.auth?.scopes })).use(writer));
    app.route(get("/lenient", (ctx) => ({ subject: ctx.auth?.subject })).use(lenient));
    app.route(get("/hs256", () => ({ ok: true })).use(hs256));
    app.route(get("/public", (ctx) => ({ auth: ctx.auth ?? null })));
    return app;
  },
  (t) => {
    const good = { sub: "ada", iss: "https://issuer.test", aud: "books" };

    it("answers 401 with a bearer challenge and the KError body when no token is sent", async () => {
      const res = await t().fetch("/api/me");
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="api"');
      expect(await res.json()).toEqual({ status_code: 401, code: "UNAUTHORIZED", message: "a bearer token is required" });
      const basicScheme = await t().fetch("/api/me", { headers: basic("ada", "x") });
      expect(basicScheme.status).toBe(401);
      expect(basicScheme.headers.get("www-authenticate")).toBe('Bearer realm="api"');
    });

    it("accepts a valid token and sets ctx.auth", async () => {
      const res = await t().fetch("/api/me", { headers: bearer(await sign({ ...good, scope: "books:read extra" })) });
      expect(res.status).toBe(200);
      const { auth } = await res.json() as { auth: Record<string, unknown> };
      expect(auth).toMatchObject({ type: "jwt", subject: "ada", scopes: ["books:read", "extra"], claims: { sub: "ada", aud: "books" } });
      expect((await t().fetch("/public")).status).toBe(200);
    });

    it.each([
      ["expired", { ...good, exp: now() - 60 }, "token expired"],
      ["not yet valid", { ...good, nbf: now() + 600 }, "token not yet valid"],
      ["for another audience", { ...good, aud: "payments" }, "token claim aud is not accepted"],
      ["from another issuer", { ...good, iss: "https://evil.test" }, "token claim iss is not accepted"],
    ])("refuses a token %s with 401 invalid_token", async (_, claims, reason) => {
      const res = await t().fetch("/api/me", { headers: bearer(await sign(claims)) });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe(`Bearer realm="api", error="invalid_token", error_description="${reason}"`);
      expect(await res.json()).toEqual({ status_code: 401, code: "UNAUTHORIZED", message: reason });
    });

    it("honours clockTolerance for exp and nbf", async () => {
      expect((await t().fetch("/lenient", { headers: bearer(await sign({ sub: "a", exp: now() - 10 })) })).status).toBe(200);
      expect((await t().fetch("/lenient", { headers: bearer(await sign({ sub: "a", nbf: now() + 10 })) })).status).toBe(200);
      expect((await t().fetch("/lenient", { headers: bearer(await sign({ sub: "a", exp: now() - 120 })) })).status).toBe(401);
    });

    it("refuses alg none, another secret, a tampered payload, a garbled token and a disallowed algorithm", async () => {
      const unsecured = new UnsecuredJWT(good).encode();
      const wrongSecret = await sign(good, { secret: OTHER_SECRET });
      const [header, , signature] = (await sign(good)).split(".");
      const tampered = `${header}.${Buffer.from(JSON.stringify({ ...good, sub: "root" })).toString("base64url")}.${signature}`;
      const cases: Array<[string, string]> = [
        [unsecured, "token algorithm not accepted"],
        [wrongSecret, "token signature is invalid"],
        [tampered, "token signature is invalid"],
        ["not-a-jwt", "token is malformed"],
      ];
      for (const [token, reason] of cases) {
        const res = await t().fetch("/api/me", { headers: bearer(token) });
        expect(res.status, reason).toBe(401);
        expect((await res.json() as { message: string }).message).toBe(reason);
      }
      const hs384 = await sign({ sub: "a" }, { alg: "HS384" });
      expect((await t().fetch("/lenient", { headers: bearer(hs384) })).status).toBe(200);
      const refused = await t().fetch("/hs256", { headers: bearer(hs384) });
      expect(refused.status).toBe(401);
      expect((await refused.json() as { message: string }).message).toBe("token algorithm not accepted");
      const spaced = await t().fetch("/api/me", { headers: { authorization: "Bearer two words" } });
      expect(spaced.status).toBe(401);
      expect(spaced.headers.get("www-authenticate")).toContain('error="invalid_token"');
    });

    it("answers 403 insufficient_scope when a required scope is missing, from scope or scp", async () => {
      const res = await t().fetch("/books", { method: "POST", headers: bearer(await sign({ ...good, scope: "books:read" })) });
      expect(res.status).toBe(403);
      expect(res.headers.get("www-authenticate")).toBe('Bearer realm="api", error="insufficient_scope", scope="books:write"');
      expect(await res.json()).toEqual({ status_code: 403, code: "FORBIDDEN", message: "missing scope: books:write" });
      const scp = await t().fetch("/books", { method: "POST", headers: bearer(await sign({ ...good, scp: ["books:write"] })) });
      expect(scp.status).toBe(200);
      expect(await scp.json()).toEqual({ subject: "ada", scopes: ["books:write"] });
    });

    it("never writes the token to the log", async () => {
      const token = await sign({ ...good, exp: now() - 60 });
      await t().fetch("/api/me?x=1", { headers: bearer(token) });
      await t().fetch("/api/me", { headers: bearer(token.slice(0, -2)) });
      const logged = t().logs.lines().join("\n");
      expect(logged).toContain("/api/me");
      expect(logged).not.toContain(token.split(".")[1]);
    });
  },
);

const signWith = (privateKey: KeyObject, alg: string, claims: Record<string, unknown> = { sub: "ada" }, kid?: string) =>
  new SignJWT(claims).setProtectedHeader({ alg, ...(kid && { kid }) }).setIssuedAt().setExpirationTime("5m").sign(privateKey);

describe("jwtAuth with public keys", () => {
  const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const ec = generateKeyPairSync("ec", { namedCurve: "P-256" });

  it("verifies RS256 with a PEM key and ES256 with a JWK, and refuses an HS token made with the public key", async () => {
    const app = new App({ port: 0 });
    const pem = rsa.publicKey.export({ type: "spki", format: "pem" }).toString();
    app.route(get("/rsa", (ctx) => ({ sub: ctx.auth?.subject })).use(jwtAuth({ publicKey: pem })));
    app.route(get("/ec", (ctx) => ({ sub: ctx.auth?.subject })).use(jwtAuth({ publicKey: await exportJWK(ec.publicKey) as JWK })));
    expect((await app.request("/rsa", { headers: bearer(await signWith(rsa.privateKey, "RS256")) })).status).toBe(200);
    expect((await app.request("/ec", { headers: bearer(await signWith(ec.privateKey, "ES256")) })).status).toBe(200);
    // The algorithm-confusion attack: an HMAC token keyed with the public key's bytes.
    const confused = await new SignJWT({ sub: "root" }).setProtectedHeader({ alg: "HS256" }).sign(new TextEncoder().encode(pem));
    const res = await app.request("/rsa", { headers: bearer(confused) });
    expect(res.status).toBe(401);
    expect((await res.json() as { message: string }).message).toBe("token algorithm not accepted");
    expect((await app.request("/rsa", { headers: bearer(await signWith(ec.privateKey, "ES256")) })).status).toBe(401);
  });

  describe("a JWKS URL on a real server", () => {
    const a = generateKeyPairSync("ec", { namedCurve: "P-256" });
    const b = generateKeyPairSync("ec", { namedCurve: "P-256" });
    let keys: JWK[] = [];
    let fetches = 0;
    let down = false;
    let server: Server;
    let url = "";
    beforeAll(async () => {
      keys = [{ ...await exportJWK(a.publicKey), kid: "a", alg: "ES256", use: "sig" }];
      server = createServer((req, res) => {
        fetches++;
        if (down) return void res.writeHead(500).end();
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys }));
      });
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it("caches the keys, follows a key rotation, refuses a retired key, and answers 503 while the JWKS is unreachable", async () => {
      const app = new App({ port: 0 });
      app.route(get("/me", (ctx) => ({ sub: ctx.auth?.subject })).use(jwtAuth({ jwksUrl: url, jwks: { cooldownDuration: 0, cacheMaxAge: 60_000 } })));
      const tokenA = await signWith(a.privateKey, "ES256", { sub: "ada" }, "a");
      expect((await app.request("/me", { headers: bearer(tokenA) })).status).toBe(200);
      expect((await app.request("/me", { headers: bearer(tokenA) })).status).toBe(200);
      expect(fetches).toBe(1);

      // Rotation: the issuer publishes b and retires a; a token naming b makes the set refetch.
      keys = [{ ...await exportJWK(b.publicKey), kid: "b", alg: "ES256", use: "sig" }];
      const tokenB = await signWith(b.privateKey, "ES256", { sub: "bob" }, "b");
      const rotated = await app.request("/me", { headers: bearer(tokenB) });
      expect(rotated.status).toBe(200);
      expect(await rotated.json()).toEqual({ sub: "bob" });
      expect(fetches).toBe(2);
      const retired = await app.request("/me", { headers: bearer(tokenA) });
      expect(retired.status).toBe(401);
      expect((await retired.json() as { message: string }).message).toBe("no key matches the token");

      const app2 = new App({ port: 0 });
      // failureBackoff 0: the failure is not remembered, so the next request fetches again.
      app2.route(get("/me", () => ({})).use(jwtAuth({ jwksUrl: url, jwks: { cooldownDuration: 0, failureBackoff: 0 } })));
      down = true;
      const unavailable = await app2.request("/me", { headers: bearer(tokenB) });
      expect(unavailable.status).toBe(503);
      expect(unavailable.headers.get("retry-after")).toBe("5");
      down = false;
      expect((await app2.request("/me", { headers: bearer(tokenB) })).status).toBe(200);
    });
  });
});

const hit = (limit: string) => limitHits().get(limit) ?? 0;

describe("jwtAuth with a hostile or broken JWKS endpoint", () => {
  let mode: "junk" | "fail" | "ok" = "junk";
  let connections = 0;
  let junkSent = 0;
  let keys: JWK[] = [];
  const pair = generateKeyPairSync("ec", { namedCurve: "P-256" });
  let server: Server;
  let url = "";
  beforeAll(async () => {
    keys = [{ ...await exportJWK(pair.publicKey), kid: "k", alg: "ES256", use: "sig" }];
    server = createServer((req, res) => {
      connections++;
      if (mode === "fail") return void res.writeHead(500).end();
      if (mode === "ok") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys }));
      // Junk without end, as fast as the reader takes it: only the reader's limit stops it.
      res.writeHead(200, { "content-type": "application/json" });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = () => {
        while (!res.destroyed) {
          junkSent += chunk.length;
          if (!res.write(chunk)) break;
        }
      };
      res.on("drain", pump);
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`;
  });
  afterAll(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));

  it("stops reading a JWKS response past jwks.maxBytes: 503 long before the fetch timeout, and no fetch again at once", async () => {
    mode = "junk";
    connections = 0;
    const app = new App({ port: 0 });
    app.route(get("/me", () => ({})).use(jwtAuth({ jwksUrl: url, jwks: { maxBytes: 64 * 1024, timeoutDuration: 10_000, failureBackoff: 60_000 } })));
    const token = await signWith(pair.privateKey, "ES256", { sub: "ada" }, "k");
    const [bytesBefore, backoffBefore] = [hit("jwks_bytes"), hit("jwks_backoff")];
    const started = performance.now();
    const first = await app.request("/me", { headers: bearer(token) });
    expect(first.status).toBe(503);
    // Without the limit the junk is read until the 10 s timeout.
    expect(performance.now() - started).toBeLessThan(5000);
    // What the server got out before the reader hung up: the limit plus the sockets' buffers, not the stream.
    expect(junkSent).toBeLessThan(32 * 1024 * 1024);
    for (let i = 0; i < 5; i++) expect((await app.request("/me", { headers: bearer(token) })).status).toBe(503);
    expect(connections).toBe(1);
    expect(hit("jwks_bytes")).toBe(bytesBefore + 1);
    expect(hit("jwks_backoff")).toBe(backoffBefore + 5);
  });

  it("remembers a failed fetch for jwks.failureBackoff, then fetches again and recovers", async () => {
    mode = "fail";
    connections = 0;
    const app = new App({ port: 0 });
    app.route(get("/me", () => ({})).use(jwtAuth({ jwksUrl: url, jwks: { failureBackoff: 300 } })));
    const token = await signWith(pair.privateKey, "ES256", { sub: "ada" }, "k");
    const statuses = [];
    for (let i = 0; i < 10; i++) statuses.push((await app.request("/me", { headers: bearer(token) })).status);
    expect(statuses).toEqual(Array(10).fill(503));
    expect(connections).toBe(1);
    mode = "ok";
    // Letting the backoff pass on purpose: nothing to wait for but time.
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect((await app.request("/me", { headers: bearer(token) })).status).toBe(200);
    expect(connections).toBe(2);
  });
});

describeBoth(
  "apiKeyAuth and basicAuth",
  (base) => {
    const app = new App(base);
    app.route(get("/keys", (ctx) => ({ auth: ctx.auth })).use(apiKeyAuth({ keys: { reporting: "k-0123456789abcdef", billing: "k-fedcba9876543210" } })));
    app.route(get("/verified", (ctx) => ({ auth: ctx.auth })).use(apiKeyAuth({
      header: "x-token", verify: (k) => (k === "tenant-7-secret-key" ? { subject: "tenant-7", scopes: ["read"] } : undefined),
    })));
    app.route(get("/admin", (ctx) => ({ auth: ctx.auth })).use(basicAuth({ users: { admin: "correct horse", "zoë": "pässwörd" }, realm: "admin area" })));
    app.route(get("/checked", (ctx) => ({ auth: ctx.auth })).use(basicAuth({ verify: (user, password) => user === "ops" && password === "p:w" })));
    return app;
  },
  (t) => {
    it("apiKeyAuth: 401 with a challenge without or with a wrong key, the key's name as subject with a right one", async () => {
      const missing = await t().fetch("/keys");
      expect(missing.status).toBe(401);
      expect(missing.headers.get("www-authenticate")).toBe('APIKey realm="api", header="x-api-key"');
      expect(await missing.json()).toEqual({ status_code: 401, code: "UNAUTHORIZED", message: "an API key is required in x-api-key" });
      const wrong = await t().fetch("/keys", { headers: { "x-api-key": "k-0123456789abcdeX" } });
      expect(wrong.status).toBe(401);
      expect(await wrong.json()).toEqual({ status_code: 401, code: "UNAUTHORIZED", message: "the API key is not accepted" });
      const right = await t().fetch("/keys", { headers: { "x-api-key": "k-fedcba9876543210" } });
      expect(right.status).toBe(200);
      expect(await right.json()).toEqual({ auth: { type: "apiKey", subject: "billing", scopes: [] } });
      const verified = await t().fetch("/verified", { headers: { "x-token": "tenant-7-secret-key" } });
      expect(await verified.json()).toEqual({ auth: { type: "apiKey", subject: "tenant-7", scopes: ["read"] } });
      expect((await t().fetch("/verified", { headers: { "x-token": "nope" } })).status).toBe(401);
      expect(t().logs.lines().join("\n")).not.toContain("k-fedcba9876543210");
    });

    it("basicAuth: 401 with a Basic challenge, wrong user or password refused, UTF-8 credentials accepted", async () => {
      const missing = await t().fetch("/admin");
      expect(missing.status).toBe(401);
      expect(missing.headers.get("www-authenticate")).toBe('Basic realm="admin area", charset="UTF-8"');
      expect((await t().fetch("/admin", { headers: basic("admin", "wrong") })).status).toBe(401);
      expect((await t().fetch("/admin", { headers: basic("nobody", "correct horse") })).status).toBe(401);
      expect((await t().fetch("/admin", { headers: { authorization: "Basic !!!" } })).status).toBe(401);
      const ok = await t().fetch("/admin", { headers: basic("zoë", "pässwörd") });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toEqual({ auth: { type: "basic", subject: "zoë", scopes: [] } });
      expect((await t().fetch("/checked", { headers: basic("ops", "p:w") })).status).toBe(200);
      expect((await t().fetch("/checked", { headers: basic("ops", "p") })).status).toBe(401);
    });
  },
);

/** An App whose route records the claims object each request got. */
function recording(cache: Parameters<typeof jwtAuth>[0]["cache"]) {
  const seen: object[] = [];
  const app = new App({ port: 0 });
  app.route(get("/me", (ctx) => {
    const { claims } = ctx.auth as Extract<AuthInfo, { type: "jwt" }>;
    seen.push(claims);
    return { frozen: Object.isFrozen(claims) && Object.isFrozen(claims.roles) };
  }).use(jwtAuth({ secret: SECRET, audience: "books", clockTolerance: 5, cache })));
  const call = async (token: string) => (await app.request("/me", { headers: bearer(token) })).status;
  return { app, seen, call };
}

describe("jwtAuth remembers verified tokens", () => {
  afterEach(() => vi.useRealTimers());

  it("serves a token seen again from what was verified, frozen; with cache: false each request is verified anew", async () => {
    const token = await sign({ sub: "ada", aud: "books", roles: ["admin"] });
    const cached = recording(undefined);
    expect([await cached.call(token), await cached.call(token)]).toEqual([200, 200]);
    expect(cached.seen[0]).toBe(cached.seen[1]);
    expect(await (await cached.app.request("/me", { headers: bearer(token) })).json()).toEqual({ frozen: true });
    const uncached = recording(false);
    expect([await uncached.call(token), await uncached.call(token)]).toEqual([200, 200]);
    expect(uncached.seen[0]).not.toBe(uncached.seen[1]);
    expect(uncached.seen[0]).toEqual(uncached.seen[1]);
  });

  it("refuses a remembered token once past its exp (with the clock tolerance), and forgets it after maxAge", async () => {
    vi.useFakeTimers({ toFake: ["Date"], now: new Date("2026-11-24T12:00:00Z") });
    const token = await sign({ sub: "ada", aud: "books", exp: now() + 60 });
    const { seen, call } = recording({ maxAge: 10_000 });
    expect(await call(token)).toBe(200);
    vi.setSystemTime(Date.now() + 9_000);
    expect(await call(token)).toBe(200);
    expect(seen[1]).toBe(seen[0]);
    // Past maxAge: verified again (a new claims object), and remembered again.
    vi.setSystemTime(Date.now() + 2_000);
    expect(await call(token)).toBe(200);
    expect(seen[2]).not.toBe(seen[0]);
    // exp + 5 s of tolerance: still inside at +64 s, refused at +65 s, though maxAge has not run out.
    vi.setSystemTime(new Date("2026-11-24T12:01:04Z"));
    expect(await call(token)).toBe(200);
    vi.setSystemTime(new Date("2026-11-24T12:01:05Z"));
    expect(await call(token)).toBe(401);
  });

  it("keeps at most max tokens, forgetting the least recently used", async () => {
    const [a, b] = await Promise.all([sign({ sub: "a", aud: "books" }), sign({ sub: "b", aud: "books" })]);
    const { seen, call } = recording({ max: 1 });
    for (const token of [a, a, b, a]) expect(await call(token)).toBe(200);
    expect(seen[1]).toBe(seen[0]);
    expect(seen[3]).not.toBe(seen[0]);
    expect(seen[3]).toEqual(seen[0]);
  });

  it("never remembers a token that failed: a forged one is refused every time", async () => {
    const forged = await sign({ sub: "ada", aud: "books" }, { secret: OTHER_SECRET });
    const { call } = recording(undefined);
    expect([await call(forged), await call(forged)]).toEqual([401, 401]);
  });
});

describe("auth options are checked at construction, naming the option", () => {
  it.each([
    [() => jwtAuth({}), /exactly one of secret, publicKey or jwksUrl \(got none\)/],
    [() => jwtAuth({ secret: SECRET, jwksUrl: "https://x.test/jwks" }), /got secret, jwksUrl/],
    [() => jwtAuth({ secret: "short" }), /secret must be .* at least 32 bytes, got 5 bytes/],
    [() => jwtAuth({ publicKey: "not a pem" }), /publicKey is not a public key/],
    [() => jwtAuth({ jwksUrl: "/relative" }), /jwksUrl must be an absolute URL/],
    [() => jwtAuth({ jwksUrl: "ftp://x.test/jwks" }), /jwksUrl must be http\(s\)/],
    [() => jwtAuth({ jwksUrl: "https://x.test/jwks", jwks: { cooldownDuration: Number.NaN } }), /jwks.cooldownDuration must be a finite number/],
    [() => jwtAuth({ jwksUrl: "https://x.test/jwks", jwks: { maxBytes: 0 } }), /jwks.maxBytes must be an integer number of bytes >= 1, got 0/],
    [() => jwtAuth({ jwksUrl: "https://x.test/jwks", jwks: { maxBytes: Number.POSITIVE_INFINITY } }), /jwks.maxBytes must be .* got Infinity/],
    [() => jwtAuth({ jwksUrl: "https://x.test/jwks", jwks: { failureBackoff: -1 } }), /jwks.failureBackoff must be a finite number of ms >= 0, got -1/],
    [() => jwtAuth({ secret: SECRET, algorithms: ["RS256"] }), /algorithms must be a non-empty subset of HS256, HS384, HS512/],
    [() => jwtAuth({ secret: SECRET, algorithms: ["none"] }), /algorithms must be/],
    [() => jwtAuth({ secret: SECRET, algorithms: [] }), /algorithms must be/],
    [() => jwtAuth({ secret: SECRET, clockTolerance: -1 }), /clockTolerance must be a finite number of seconds >= 0, got -1/],
    [() => jwtAuth({ secret: SECRET, clockTolerance: Number.NaN }), /clockTolerance .* got NaN/],
    [() => jwtAuth({ secret: SECRET, audience: [] }), /audience must be a non-empty string/],
    [() => jwtAuth({ secret: SECRET, issuer: "" }), /issuer must be a non-empty string/],
    [() => jwtAuth({ secret: SECRET, scopes: ["a b"] }), /scopes must be an array of non-empty strings without spaces/],
    [() => jwtAuth({ secret: SECRET, realm: "" }), /realm must be a non-empty string/],
    [() => jwtAuth({ secret: SECRET, schemeName: "a b" }), /schemeName must match/],
    [() => jwtAuth({ secret: SECRET, cache: true as unknown as false }), /cache must be false or \{ max\?, maxAge\? \}, got true/],
    [() => jwtAuth({ secret: SECRET, cache: { max: 0 } }), /cache.max must be an integer >= 1, got 0/],
    [() => jwtAuth({ secret: SECRET, cache: { maxAge: Number.NaN } }), /cache.maxAge must be a finite number of ms > 0, got NaN/],
    [() => apiKeyAuth({}), /apiKeyAuth: give exactly one of keys or verify/],
    [() => apiKeyAuth({ keys: {} }), /keys must name at least one key/],
    [() => apiKeyAuth({ keys: { a: "short" } }), /keys.a must be at least 16 visible ASCII characters \(got 5 characters\)/],
    [() => apiKeyAuth({ header: "bad header", verify: () => undefined }), /header must be a header name/],
    [() => basicAuth({}), /basicAuth: give exactly one of users or verify/],
    [() => basicAuth({ users: { "a:b": "x" } }), /user name "a:b" must be non-empty and without ':'/],
    [() => basicAuth({ users: { a: "" } }), /users.a must be a non-empty password/],
  ])("%#: %s", (make, message) => {
    expect(make).toThrow(message);
  });

  it("accepts a key as Uint8Array and every listed algorithm", () => {
    expect(() => jwtAuth({ secret: key, algorithms: ["HS512"] })).not.toThrow();
  });
});

describe("the OpenAPI document of authenticated routes", () => {
  it("lists each route's security requirement with its scopes, the schemes, and 401/403 without the route repeating them", async () => {
    const { validate, compileErrors } = await import("@readme/openapi-parser");
    const app = new App({ port: 0, docs: { securitySchemes: { partner: { type: "apiKey", in: "header", name: "x-partner", description: "Declared by the App" } } } });
    const writer = jwtAuth({ secret: SECRET, scopes: ["books:write"] });
    app.group("/api", jwtAuth({ secret: SECRET })).route(get("/me", () => ({})));
    app.route(post("/books", () => ({})).use(writer));
    app.route(get("/reports", () => ({})).use(apiKeyAuth({ keys: { r: "k-0123456789abcdef" } })));
    app.route(get("/partner", () => ({})).use(apiKeyAuth({ header: "x-partner", schemeName: "partner", keys: { p: "k-0123456789abcdef" } })));
    app.route(get("/admin", () => ({})).use(basicAuth({ users: { admin: "pw" } })).secured("bearer"));
    app.route(get("/documented", () => ({})).secured("bearer"));
    app.route(get("/open", () => ({})));
    const document = await (await app.request("/docs/openapi.json")).json() as {
      paths: Record<string, Record<string, { security?: unknown; responses: Record<string, { headers?: Record<string, unknown>; $ref?: string }> }>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    const op = (path: string, method = "get") => document.paths[path]![method]!;
    expect(op("/api/me").security).toEqual([{ bearer: [] }]);
    expect(op("/books", "post").security).toEqual([{ bearer: ["books:write"] }]);
    expect(Object.keys(op("/books", "post").responses)).toEqual(expect.arrayContaining(["401", "403"]));
    expect(op("/books", "post").responses["401"]!.headers).toHaveProperty("WWW-Authenticate");
    expect(op("/api/me").responses["403"]).toBeUndefined();
    expect(op("/reports").security).toEqual([{ apiKey: [] }]);
    expect(op("/partner").security).toEqual([{ partner: [] }]);
    // A credential checked by middleware and one the route names: both are required.
    expect(op("/admin").security).toEqual([{ basic: [], bearer: [] }]);
    expect(op("/documented").security).toEqual([{ bearer: [] }]);
    expect(op("/open").security).toEqual([]);
    expect(document.components.securitySchemes).toEqual({
      bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
      apiKey: { type: "apiKey", in: "header", name: "x-api-key" },
      partner: { type: "apiKey", in: "header", name: "x-partner", description: "Declared by the App" },
      basic: { type: "http", scheme: "basic" },
    });
    const result = await validate(structuredClone(document) as never);
    expect(result.valid, result.valid ? "" : compileErrors(result)).toBe(true);
  });
});
