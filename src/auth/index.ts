export { apiKeyAuth, type ApiKeyAuthOptions, type ApiKeyPrincipal } from "./api-key.js";
export { basicAuth, type BasicAuthOptions } from "./basic.js";
export { jwtAuth, type JwtAuthOptions } from "./jwt.js";
export type { JwtCacheOptions } from "./verified-tokens.js";
export type { AuthInfo } from "./principal.js";
