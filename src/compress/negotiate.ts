/** A content coding keelson's `compress()` can produce. */
export type Encoding = "zstd" | "br" | "gzip";

/** An RFC 9110 qvalue ("0", "0.5", "1.000"); anything else is not one. */
const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/;

/** Answers kept per negotiator: clients send a handful of distinct values, over and over. */
const MAX_CACHED = 256;

/**
 * The chooser of the coding to send for an `Accept-Encoding` value (RFC 9110 §12.5.3): the offered
 * one with the highest q-value, `*` standing for every coding the header does not name, `q=0`
 * refusing it, ties going to the earlier one in `offered`. `x-gzip` is gzip. Undefined when none is
 * acceptable: the body then goes out unencoded (identity), as every compressing server does rather
 * than answer 406.
 */
export function encodingNegotiator(offered: readonly Encoding[]): (header: string) => Encoding | undefined {
  const cache = new Map<string, Encoding | null>();
  return (header) => {
    const cached = cache.get(header);
    if (cached !== undefined) return cached ?? undefined;
    const chosen = choose(header, offered);
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(header, chosen ?? null);
    return chosen;
  };
}

function choose(header: string, offered: readonly Encoding[]): Encoding | undefined {
  const weights = new Map<string, number>();
  for (const item of header.split(",")) {
    const [rawName, ...params] = item.split(";");
    const name = rawName!.trim().toLowerCase();
    if (name === "") continue;
    let q = 1;
    for (const param of params) {
      const [paramName, paramValue] = param.split("=");
      if (paramName?.trim().toLowerCase() !== "q") continue;
      const text = paramValue?.trim() ?? "";
      // A malformed weight makes the whole entry unreadable: it is ignored, not taken as q=1.
      q = QVALUE.test(text) ? Number(text) : Number.NaN;
    }
    if (Number.isNaN(q)) continue;
    const coding = name === "x-gzip" ? "gzip" : name;
    // A coding named twice keeps its higher weight.
    weights.set(coding, Math.max(q, weights.get(coding) ?? 0));
  }
  const wildcard = weights.get("*");
  let best: Encoding | undefined;
  let bestQ = 0;
  for (const coding of offered) {
    const q = weights.get(coding) ?? wildcard ?? 0;
    if (q > bestQ) {
      best = coding;
      bestQ = q;
    }
  }
  return best;
}
