import { isIPv4, isIPv6 } from "node:net";

/**
 * The default IPv6 prefix a client is grouped by: express-rate-limit v8's `ipv6Subnet` default.
 * An ISP hands a household or a VPS at least a /64 (often a /56 or /48), and every address in it is
 * the same client's: keyed by full address, rotating through them gets a fresh window per request.
 */
export const DEFAULT_IPV6_SUBNET = 56;

const parseGroups = (side: string): number[] => (side === "" ? [] : side.split(":").map((group) => Number.parseInt(group, 16)));
const hexGroups = (groups: number[]): string => groups.map((group) => group.toString(16)).join(":");

/** The 16 bytes of an IPv6 address (zone id dropped), or undefined when `text` is not one. */
function ipv6Bytes(text: string): Uint8Array | undefined {
  const zone = text.indexOf("%");
  const address = zone === -1 ? text : text.slice(0, zone);
  if (!isIPv6(address)) return undefined;
  let head = address;
  const tail: number[] = [];
  // A dotted IPv4 tail (`::ffff:192.0.2.1`) stands for the last two groups.
  const lastColon = head.lastIndexOf(":");
  if (head.includes(".", lastColon)) {
    const parts = head.slice(lastColon + 1).split(".").map(Number);
    tail.push((parts[0]! << 8) | parts[1]!, (parts[2]! << 8) | parts[3]!);
    head = head.slice(0, lastColon + 1) + "0";
  }
  const [left, right] = head.includes("::") ? head.split("::") as [string, string] : [head, undefined];
  const before = parseGroups(left);
  const after = right === undefined ? [] : parseGroups(right);
  if (tail.length > 0) (after.length > 0 ? after : before).splice(-1, 1, ...tail);
  const all = [...before, ...Array.from({ length: 8 - before.length - after.length }, () => 0), ...after];
  const bytes = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    bytes[2 * i] = all[i]! >> 8;
    bytes[2 * i + 1] = all[i]! & 0xff;
  }
  return bytes;
}

/** `2001:db8:0:100:0:0:0:0` → `2001:db8:0:100::` (RFC 5952: the longest run of zero groups, leftmost on a tie, shortened). */
function formatIPv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((bytes[i]! << 8) | bytes[i + 1]!);
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; i++) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i];
    i = j;
  }
  if (bestStart === -1) return hexGroups(groups);
  return `${hexGroups(groups.slice(0, bestStart))}::${hexGroups(groups.slice(bestStart + bestLength))}`;
}

/**
 * The rate-limit key of a client address: an IPv4 address as it is; an IPv4-mapped IPv6 address
 * (`::ffff:192.0.2.1`, what a dual-stack socket reports for an IPv4 client) as its IPv4 address; any
 * other IPv6 address as its `/subnet` prefix in CIDR notation (`2001:db8:0:100::/56`), or whole
 * (normalised) when `subnet` is `false` or 128. Anything else (no address, a proxy's garbage) is
 * returned unchanged: it still gets a key of its own. Use it in a `key` function that falls back
 * to the client's address, so that fallback is grouped the way the default key is.
 *
 * @example
 * addressKey("2001:db8:0:1ab:5:6:7:8", 56); // "2001:db8:0:100::/56"
 * addressKey("::ffff:192.0.2.1", 56); // "192.0.2.1"
 * rateLimit({ limit: 100, windowMs: 60_000, key: (event) => event.req.headers.get("x-api-key") ?? addressKey(event.req.ip ?? "", 56) });
 */
export function addressKey(address: string, subnet: number | false): string {
  if (address === "" || isIPv4(address)) return address;
  const bytes = ipv6Bytes(address);
  if (bytes === undefined) return address;
  const mapped = bytes.subarray(0, 10).every((byte) => byte === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  if (mapped) return bytes.subarray(12).join(".");
  if (subnet === false || subnet === 128) return formatIPv6(bytes);
  for (let bit = subnet; bit < 128; bit++) bytes[bit >> 3]! &= ~(0x80 >> (bit & 7));
  return `${formatIPv6(bytes)}/${subnet}`;
}
