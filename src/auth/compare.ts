import { createHash, timingSafeEqual } from "node:crypto";

/**
 * Compares a presented secret with an expected one in time that depends on neither: both are
 * hashed first, so their lengths leak nothing either.
 */
export function safeEqual(presented: string, expected: string): boolean {
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b);
}
