export { apiKeyAuth, type ApiKeyAuthOptions, type ApiKeyPrincipal } from "../auth/api-key.js";
export { basicAuth, type BasicAuthOptions } from "../auth/basic.js";
export { jwtAuth, type JwtAuthOptions } from "../auth/jwt.js";
export type { JwtCacheOptions } from "../auth/verified-tokens.js";
export type { AuthInfo } from "../http/context.js";
