"""cattn.server.errors — the server's error: an HTTP status and OpenAI's
error body {"error": {"message", "type", "param", "code"}}, with the
status codes the official `openai` client maps to its exceptions (400
BadRequestError, 401 AuthenticationError, 404 NotFoundError, 413 and 503
APIStatusError, 429 RateLimitError). Messages name the field and value, and
never carry a stack trace or a path. What it is not: request parsing
(cattn.server.requests).
"""

__all__ = ["APIError", "bad_request", "error_body"]

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
          405: "invalid_request_error", 413: "invalid_request_error",
          429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}


class APIError(Exception):
    """An error answered as status + OpenAI's error body (headers: extra
    response headers, e.g. Retry-After)."""

    def __init__(self, status, message, param=None, code=None, headers=None, type=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers or {}
        self.type = type or _TYPES.get(status, "invalid_request_error")

    def body(self):
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message, type="invalid_request_error", param=None, code=None):
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad_request(message, param=None, code=None):
    return APIError(400, message, param=param, code=code)
