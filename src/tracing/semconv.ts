/**
 * Attribute names of the stable OpenTelemetry HTTP semantic conventions, as plain strings
 * (the values of `@opentelemetry/semantic-conventions`' `ATTR_*` constants, without the dependency).
 */
export const ATTR_HTTP_REQUEST_METHOD = "http.request.method";
export const ATTR_HTTP_REQUEST_METHOD_ORIGINAL = "http.request.method_original";
export const ATTR_HTTP_ROUTE = "http.route";
export const ATTR_HTTP_RESPONSE_STATUS_CODE = "http.response.status_code";
export const ATTR_URL_PATH = "url.path";
export const ATTR_URL_SCHEME = "url.scheme";
export const ATTR_SERVER_ADDRESS = "server.address";
export const ATTR_SERVER_PORT = "server.port";
export const ATTR_USER_AGENT_ORIGINAL = "user_agent.original";
export const ATTR_ERROR_TYPE = "error.type";

/** The span-name prefix for methods outside the known set (the conventions' rule for `_OTHER`). */
export const OTHER_METHOD_SPAN_NAME = "HTTP";
