"""Who may use X-Ray, and how mutations are protected.

* Bound to loopback (the default), every local user of the machine may read; a request whose
  ``Host`` is not a loopback name is refused (DNS rebinding).
* Bound to any other address, a bearer token is required (``--token`` or
  ``ADS_RANKING_XRAY_TOKEN``; the server refuses to start without one). API clients send
  ``Authorization: Bearer <token>``; a browser signs in once (``/login``, or a link with
  ``?token=``) and gets an HttpOnly, SameSite=Strict session cookie derived from the token.
* Every mutation is a POST carrying a CSRF token (double submit: a random HttpOnly cookie and
  the same value in the form or the ``X-CSRF-Token`` header). Requests authenticated by a
  bearer header need none: browsers never attach that header on their own.
* Every response carries a strict Content-Security-Policy (no inline script), ``nosniff``,
  no framing and no Referer (notebook links carry their token).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SESSION_COOKIE = "xray_session"
CSRF_COOKIE = "xray_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
PUBLIC_PATHS = ("/login", "/static/", "/healthz")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
       "form-action 'self'")
SECURITY_HEADERS = {
    "content-security-policy": CSP, "x-content-type-options": "nosniff",
    "x-frame-options": "DENY", "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class CsrfError(PermissionError):
    pass


def session_value(token: str) -> str:
    return hmac.new(token.encode(), b"xray-session", hashlib.sha256).hexdigest()


def _cookies(headers: Headers) -> dict[str, str]:
    jar = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no cookie
        return {}
    return {k: v.value for k, v in jar.items()}


def _host(headers: Headers) -> str:
    host = headers.get("host", "")
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class SecurityMiddleware:
    """Host check, bearer/session authentication, CSRF cookie and security headers."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    def authenticated(self, headers: Headers, cookies: dict[str, str]) -> str | None:
        """``"bearer"``, ``"session"`` or ``"open"`` (no token configured); None if refused."""
        if self.token is None:
            return "open"
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and hmac.compare_digest(auth[7:].strip(), self.token):
            return "bearer"
        if hmac.compare_digest(cookies.get(SESSION_COOKIE, ""), session_value(self.token)):
            return "session"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.loopback and _host(headers) not in LOOPBACK_HOSTS:
            await PlainTextResponse("invalid Host header for a loopback-bound X-Ray", 400)(
                scope, receive, send)
            return
        cookies = _cookies(headers)
        path = scope.get("path", "")
        query = dict(parse_qsl(scope.get("query_string", b"").decode()))
        auth = self.authenticated(headers, cookies)
        if auth is None and self.token and scope["method"] == "GET" and "token" in query \
                and hmac.compare_digest(query["token"], self.token):
            await self._sign_in(scope, receive, send, path, query)
            return
        if auth is None and not path.startswith(PUBLIC_PATHS):
            await self._refuse(scope, receive, send, path, headers)
            return
        csrf = cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        scope.setdefault("state", {}).update(csrf=csrf, auth=auth)
        await self.app(scope, receive, self._with_headers(send, csrf, CSRF_COOKIE not in cookies))

    def _with_headers(self, send: Send, csrf: str, new_cookie: bool) -> Send:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                out = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS.items():
                    out.setdefault(key, value)
                if new_cookie:
                    out.append("set-cookie", f"{CSRF_COOKIE}={csrf}; Path=/; HttpOnly; SameSite=Strict")
            await send(message)
        return wrapped

    async def _sign_in(self, scope: Scope, receive: Receive, send: Send, path: str,
                       query: dict[str, str]) -> None:
        rest = {k: v for k, v in query.items() if k != "token"}
        target = path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(SESSION_COOKIE, session_value(self.token or ""), httponly=True,
                            samesite="strict", path="/")
        await response(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, path: str,
                      headers: Headers) -> None:
        if path.startswith("/api/") or "text/html" not in headers.get("accept", ""):
            response: Any = JSONResponse({"error": "authentication required: send "
                                          "'Authorization: Bearer <token>'"}, 401,
                                         headers={"WWW-Authenticate": "Bearer"})
        else:
            response = RedirectResponse(f"/login?{urlencode({'next': path})}", status_code=303)
        await response(scope, receive, send)


async def check_csrf(request: Request, form: Any = None) -> None:
    """Raise :class:`CsrfError` unless the request carries the CSRF cookie's value (form
    field or header), or is authenticated by a bearer header."""
    if request.state.auth == "bearer":
        return
    expected = request.cookies.get(CSRF_COOKIE, "")
    given = request.headers.get(CSRF_HEADER, "")
    if not given and form is not None:
        given = str(form.get(CSRF_FIELD, ""))
    if not expected or not given or not hmac.compare_digest(expected, given):
        raise CsrfError("missing or wrong CSRF token: reload the page and try again")
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = origin.split("://", 1)[-1]
        if host != request.headers.get("host"):
            raise CsrfError(f"cross-origin request from {origin} refused")


def login_check(token: str | None, given: str) -> bool:
    return bool(token) and hmac.compare_digest(given, token or "")
