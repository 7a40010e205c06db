/** `512M`, `1.5G`, `800000000`: bytes. Throws a one-line reason, naming `what`, on anything else. */
export function parseSize(text: string, what = "maxMemory"): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$/i.exec(text);
  if (match === null) throw new Error(`${what} expects a size such as 512M, 2G or a number of bytes, got "${text}"`);
  const unit = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[(match[2] ?? "").toLowerCase() as "" | "k" | "m" | "g"];
  const bytes = Math.round(Number(match[1]) * unit);
  if (bytes <= 0) throw new Error(`${what} must be above 0, got "${text}"`);
  return bytes;
}

/** `512 MB`. */
export function formatMegabytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MB`;
}
