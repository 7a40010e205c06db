import type { H3Event } from "h3";
import { createError } from "../errors.js";
import type { AuthInfo } from "../http/context.js";
import { errorResponse } from "../http/error-response.js";

/** A quoted-string of an auth-param (RFC 9110 §11.2): backslash and double quote escaped. */
export function quoted(value: string): string {
  return `"${value.replace(/["\\]/g, "\\$&")}"`;
}

/** `401 UNAUTHORIZED` with its challenge; the message never repeats the credential. */
export function unauthorizedResponse(challenge: string, message: string): ReturnType<typeof errorResponse> {
  return errorResponse(createError("UNAUTHORIZED", message), { "www-authenticate": challenge });
}

/** `403 FORBIDDEN`: authenticated, but without a scope the route requires. */
export function forbiddenResponse(missing: readonly string[], challenge?: string): ReturnType<typeof errorResponse> {
  const message = `missing scope${missing.length > 1 ? "s" : ""}: ${missing.join(" ")}`;
  return errorResponse(createError("FORBIDDEN", message), challenge === undefined ? undefined : { "www-authenticate": challenge });
}

/** The required scopes a principal lacks. */
export function missingScopes(required: readonly string[], granted: readonly string[]): string[] {
  return required.filter((scope) => !granted.includes(scope));
}

/** Refuses an option that is not a list of non-empty strings without spaces. */
export function checkScopes(factory: string, scopes: unknown): readonly string[] {
  if (scopes === undefined) return [];
  if (!Array.isArray(scopes) || scopes.some((s) => typeof s !== "string" || s === "" || /\s/.test(s))) {
    throw new TypeError(`${factory}: scopes must be an array of non-empty strings without spaces, got ${JSON.stringify(scopes)}`);
  }
  return scopes as string[];
}

/** Refuses a realm that is not a non-empty string. */
export function checkRealm(factory: string, realm: unknown, fallback: string): string {
  if (realm === undefined) return fallback;
  if (typeof realm !== "string" || realm === "") throw new TypeError(`${factory}: realm must be a non-empty string, got ${JSON.stringify(realm)}`);
  return realm;
}

/** Refuses a scheme name that OpenAPI could not use as a key. */
export function checkSchemeName(factory: string, name: unknown, fallback: string): string {
  if (name === undefined) return fallback;
  if (typeof name !== "string" || !/^[A-Za-z0-9._-]+$/.test(name)) {
    throw new TypeError(`${factory}: schemeName must match [A-Za-z0-9._-]+, got ${JSON.stringify(name)}`);
  }
  return name;
}

/** Sets `ctx.auth` for the rest of the request. */
export function setAuth(event: H3Event, auth: AuthInfo): void {
  event.context.auth = auth;
}
