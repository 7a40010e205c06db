const DEFAULT_LANGUAGE = "en";

interface Weighted {
  tag: string;
  q: number;
}

function parseAcceptLanguage(header: string): Weighted[] {
  const out: Weighted[] = [];
  for (const part of header.split(",")) {
    const [rawTag, ...params] = part.trim().split(";");
    const tag = rawTag?.trim().toLowerCase();
    if (!tag) continue;
    let q = 1;
    for (const p of params) {
      const [k, v] = p.trim().split("=");
      if (k === "q" && v !== undefined) q = Number.isFinite(Number(v)) ? Number(v) : 0;
    }
    if (q > 0) out.push({ tag, q });
  }
  // Stable sort keeps header order among equal weights, as RFC 9110 intends.
  return out.toSorted((a, b) => b.q - a.q);
}

/**
 * Picks the language for a request: the best-weighted Accept-Language tag that `available`
 * has (exact match first, then by primary subtag: `de-AT` → `de`), else `available[0]`.
 * Without a list of languages, the best tag itself (or `en`).
 */
export function negotiateLanguage(header: string | null, available: readonly string[] | undefined): string {
  const wanted = header ? parseAcceptLanguage(header) : [];
  if (!available || available.length === 0) {
    const best = wanted.find((w) => w.tag !== "*");
    return best?.tag ?? DEFAULT_LANGUAGE;
  }
  const lower = available.map((l) => l.toLowerCase());
  for (const { tag } of wanted) {
    const exact = lower.indexOf(tag);
    if (exact >= 0) return available[exact]!;
    const primary = tag.split("-")[0];
    const partial = lower.findIndex((l) => l === primary || l.split("-")[0] === primary);
    if (partial >= 0) return available[partial]!;
  }
  return available[0]!;
}
