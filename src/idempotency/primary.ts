import type { FeatureHost } from "../cluster/feature-host.js";
import { idempotencyBegin, idempotencyComplete, idempotencyRelease } from "./ipc.js";
import { MemoryIdempotencyStore, type IdempotencyBegin, type IdempotencyComplete, type IdempotencyRelease, type StoredResponse } from "./store.js";

/** What the idempotency broker needs from the primary. */
export type IdempotencyHost = Pick<FeatureHost, "handle" | "onWorker">;

/**
 * The cluster's idempotency keys, in the primary: every worker claims a key here
 * (`idempotency:begin`), so one request per key runs however the requests are spread. A worker's
 * tokens start with its pid: when it exits, the keys it still held are released at once instead
 * of at the end of their lease. Costs nothing until a worker's middleware asks.
 */
export function installIdempotency(host: IdempotencyHost): MemoryIdempotencyStore {
  const store = new MemoryIdempotencyStore();
  host.handle(idempotencyBegin, (begin) => store.beginNow(checkedBegin(begin)));
  host.handle(idempotencyComplete, (complete) => (store.completeNow(checkedComplete(complete)), true));
  host.handle(idempotencyRelease, (release) => (store.releaseNow(checkedRelease(release)), true));
  host.onWorker((worker) => {
    void worker.exited.then(() => store.releaseHeldBy(`${worker.pid}:`));
  });
  return store;
}

const MAX_MS = 366 * 24 * 3600 * 1000;
const text = (value: unknown) => typeof value === "string" && value.length > 0 && value.length <= 512;
const ms = (value: unknown) => Number.isSafeInteger(value) && (value as number) > 0 && (value as number) <= MAX_MS;

function malformed(type: string): never {
  throw new Error(`malformed idempotency:${type} request`);
}

function checkedBegin(begin: IdempotencyBegin): IdempotencyBegin {
  const { key, fingerprint, token, leaseMs, now } = begin ?? {};
  if (!text(key) || !text(fingerprint) || !text(token) || !ms(leaseMs) || !Number.isFinite(now)) malformed("begin");
  return { key, fingerprint, token, leaseMs, now };
}

function checkedResponse(response: StoredResponse): StoredResponse {
  const { status, headers, body, omitted } = response ?? {};
  if (!Number.isInteger(status) || status < 100 || status > 599 || !Array.isArray(headers) || typeof body !== "string"
    || !headers.every((h) => Array.isArray(h) && typeof h[0] === "string" && typeof h[1] === "string")) malformed("complete");
  return omitted === true ? { status, headers, body, omitted } : { status, headers, body };
}

function checkedComplete(complete: IdempotencyComplete): IdempotencyComplete {
  const { key, token, response, ttlMs, now } = complete ?? {};
  if (!text(key) || !text(token) || !ms(ttlMs) || !Number.isFinite(now)) malformed("complete");
  return { key, token, response: checkedResponse(response), ttlMs, now };
}

function checkedRelease(release: IdempotencyRelease): IdempotencyRelease {
  const { key, token } = release ?? {};
  if (!text(key) || !text(token)) malformed("release");
  return { key, token };
}
