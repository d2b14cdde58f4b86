"""The request body size limit, on every route (the JSON API and the HTML form posts alike).

Every body X-Ray understands is a handful of short fields (the create form, a delete
confirmation, a sign-in token): well under 1 KiB. A body over :data:`MAX_BODY_BYTES` is refused
with 413: at once when its ``Content-Length`` says so (nothing is read), else as soon as the
bytes read so far pass the limit (a chunked body), so no body larger than the limit plus one
ASGI message ever sits in memory.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024


class BodyTooLarge(Exception):
    """Raised from ``receive`` once a body passes the limit; the app answers 413."""


def _valid(limit: int) -> str:
    return f"valid: at most {limit} bytes ({limit / 1024:g} KiB)"


def _declared(headers: Headers) -> int | None:
    try:
        return int(headers.get("content-length", ""))
    except ValueError:
        return None


def _refusal(scope: Scope, headers: Headers, message: str) -> Response:
    if scope.get("path", "").startswith("/api/") or "text/html" not in headers.get("accept", ""):
        return JSONResponse({"error": message}, 413)
    return PlainTextResponse(message, 413)


class BodyLimitMiddleware:
    """413 for a body over ``limit`` bytes, by its Content-Length or by the bytes read."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = _declared(headers)
        if declared is not None and declared > self.limit:
            message = f"the request body is {declared} bytes; {_valid(self.limit)}"
            await _refusal(scope, headers, message)(scope, receive, send)
            return
        read = 0

        async def counted() -> Message:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
                if read > self.limit:
                    raise BodyTooLarge(f"the request body is over {self.limit} bytes; "
                                       f"{_valid(self.limit)}")
            return message

        await self.app(scope, counted, send)
