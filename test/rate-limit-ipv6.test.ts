// IPv6 clients are counted by prefix (issue 23, defect 6): twenty addresses of one /64 behind a
// trusted proxy share one budget, in-process and over a real socket; the prefix is configurable and
// validated; IPv4-mapped addresses count as IPv4.
import { expect, it } from "vitest";
import { describeBoth } from "./helpers/both.js";
import { App, addressKey, get, rateLimit, type RateLimitOptions } from "../src/index.js";

const build = (options: Partial<RateLimitOptions>) => (base: object) => {
  const app = new App(base);
  // A day: the cases never straddle two windows.
  app.use(rateLimit({ limit: 5, windowMs: 86_400_000, trustedProxies: 1, ...options }));
  app.route(get("/items", () => ({ ok: true })));
  return app;
};

/** Twenty addresses of 2001:db8:aa:bb::/64, as a client rotating through its own network would use. */
const ROTATING = Array.from({ length: 20 }, (_, i) => `2001:db8:aa:bb:${(i * 797).toString(16)}:${i}:ab:${i + 1}`);

/** Our one trusted proxy appended the client's address; the entry before it is whatever the client forged. */
const via = (client: string) => ({ headers: { "x-forwarded-for": `198.51.100.99, ${client}` } });

describeBoth("IPv6 rotation, default /56", build({}), (target) => {
  it("twenty addresses of one /64 get 5 of 20 through, like one address", async () => {
    const statuses: number[] = [];
    for (const address of ROTATING) statuses.push((await target().fetch("/items", via(address))).status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(5);
    expect(statuses.slice(5).every((status) => status === 429)).toBe(true);
  });

  it("another /56 has its own budget; the same /56 does not", async () => {
    expect((await target().fetch("/items", via("2001:db8:aa:1bb::1"))).status).toBe(200);
    // 2001:db8:aa:bb:: and 2001:db8:aa:ff:: share the /56 2001:db8:aa::/56 with the rotating client.
    expect((await target().fetch("/items", via("2001:db8:aa:ff::1"))).status).toBe(429);
  });

  it("an IPv4-mapped address counts as its IPv4 address", async () => {
    for (let i = 0; i < 5; i++) expect((await target().fetch("/items", via("192.0.2.10"))).status).toBe(200);
    expect((await target().fetch("/items", via("::ffff:192.0.2.10"))).status).toBe(429);
    expect((await target().fetch("/items", via("::ffff:c000:20a"))).status).toBe(429);
    expect((await target().fetch("/items", via("192.0.2.11"))).status).toBe(200);
  });
});

describeBoth("IPv6 rotation, ipv6Subnet: false", build({ ipv6Subnet: false }), (target) => {
  it("keys by the full address: each of the twenty gets its own window", async () => {
    const statuses: number[] = [];
    for (const address of ROTATING) statuses.push((await target().fetch("/items", via(address))).status);
    expect(statuses.every((status) => status === 200)).toBe(true);
    // One address, written two ways, is still one key.
    for (let i = 0; i < 5; i++) await target().fetch("/items", via("2001:db8::1"));
    expect((await target().fetch("/items", via("2001:DB8:0:0:0:0:0:1"))).status).toBe(429);
  });
});

describeBoth("IPv6 rotation, ipv6Subnet: 64", build({ ipv6Subnet: 64 }), (target) => {
  it("groups the /64 but not its /56 neighbours", async () => {
    const statuses: number[] = [];
    for (const address of ROTATING) statuses.push((await target().fetch("/items", via(address))).status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(5);
    expect((await target().fetch("/items", via("2001:db8:aa:bc::1"))).status).toBe(200);
  });
});

it("addressKey: IPv4 as is, IPv4-mapped as IPv4, IPv6 by prefix, anything else unchanged", () => {
  const cases: [string, number | false, string][] = [
    ["192.0.2.1", 56, "192.0.2.1"],
    ["::ffff:192.0.2.1", 56, "192.0.2.1"],
    ["::FFFF:c000:0201", 128, "192.0.2.1"],
    ["0:0:0:0:0:ffff:192.0.2.1", false, "192.0.2.1"],
    ["2001:db8:0:1ab:5:6:7:8", 56, "2001:db8:0:100::/56"],
    ["2001:db8:0:1ab:5:6:7:8", 64, "2001:db8:0:1ab::/64"],
    ["2001:db8:0:1ab:5:6:7:8", 48, "2001:db8::/48"],
    ["2001:db8:0:1ab:5:6:7:8", 32, "2001:db8::/32"],
    ["2001:db8:0:1ab:5:6:7:8", 60, "2001:db8:0:1a0::/60"],
    ["2001:db8:0:1ab:5:6:7:8", 128, "2001:db8:0:1ab:5:6:7:8"],
    ["2001:0DB8:0000:0000:0000:0000:0000:0001", false, "2001:db8::1"],
    ["fe80::1%eth0", 64, "fe80::/64"],
    ["::1", 56, "::/56"],
    ["::1", false, "::1"],
    ["64:ff9b::192.0.2.1", false, "64:ff9b::c000:201"],
    ["1:0:0:1:0:0:0:1", false, "1:0:0:1::1"],
    ["", 56, ""],
    ["unknown", 56, "unknown"],
    ["[::1]:8080", 56, "[::1]:8080"],
  ];
  for (const [address, subnet, key] of cases) expect([address, subnet, addressKey(address, subnet)]).toEqual([address, subnet, key]);
});

const make = (ipv6Subnet: unknown, extra: object = {}) => () => rateLimit({ limit: 1, windowMs: 1000, ipv6Subnet, ...extra } as RateLimitOptions);

it("ipv6Subnet is validated when the middleware is made", () => {
  for (const bad of [31, 129, 0, -1, 56.5, Number.NaN, Number.POSITIVE_INFINITY, "56", true]) {
    expect(make(bad)).toThrow(`rateLimit: ipv6Subnet must be a prefix length from 32 to 128, or false, got ${String(bad)}`);
  }
  for (const good of [32, 48, 56, 64, 128, false]) expect(make(good)).not.toThrow();
  expect(make(64, { key: () => "k" })).toThrow("ipv6Subnet applies to the default key only");
});
