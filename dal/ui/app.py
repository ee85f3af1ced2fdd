"""The ``dal ui`` web app: catalog pages and a JSON API, read-only, over one ``Catalog``.

Pages are server-rendered Jinja templates (autoescaped) with inline SVG charts: no JavaScript, no CDN.
A strict Content-Security-Policy forbids scripts altogether, so an escaping slip could not run one either.
Only GET and HEAD are served (anything else is 405), and with a token every request must carry it.

This module assembles the app and holds the rules every request passes (GET/HEAD only, the token, the security
headers, loopback host names, the 404 of an unknown path); the routes are ``dal.ui.pages`` (HTML) and
``dal.ui.api`` (JSON), each handler taking the ``dal.ui.web.Ui`` context and the request.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from dal.catalog import Catalog
from dal.progress import size_text
from dal.ui import api, pages
from dal.ui.api import API_SUMMARIES, MAX_DEPTH, openapi_document
from dal.ui.pages import MAX_HISTORY, VERSIONS_PER_PAGE
from dal.ui.web import Ui, json_response
from dal.ui.web import human_size as _human_size

__all__ = [
    "API_SUMMARIES",
    "MAX_DEPTH",
    "MAX_HISTORY",
    "VERSIONS_PER_PAGE",
    "_human_size",
    "create_app",
    "openapi_document",
    "size_text",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "dal_ui_token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class _Guard:
    """Pure ASGI middleware: GET/HEAD only (405 otherwise), the token when one is set, security headers."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                message["headers"] = headers
            await send(message)

        if scope["method"] not in ("GET", "HEAD"):
            response: Response = _answer(scope, "dal ui is read-only: only GET and HEAD", 405)
            response.headers["allow"] = "GET, HEAD"
            await response(scope, receive, send_with_headers)
            return
        if self.token is not None:
            request = Request(scope)
            given = _bearer(request.headers.get("authorization", ""))
            from_query = request.query_params.get("token")
            if given is None:
                given = from_query or request.cookies.get(COOKIE)
            if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
                response = _answer(
                    scope,
                    "a token is needed: send 'Authorization: Bearer TOKEN' or open the page once with ?token=TOKEN",
                    401,
                )
                response.headers["www-authenticate"] = "Bearer"
                await response(scope, receive, send_with_headers)
                return
            if from_query is not None:
                # keep the token out of the address bar, history and links: a cookie from now on
                rest = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
                # one leading slash: '//evil.com/' or '/\\evil.com/' as a Location is another site to a browser
                path = "/" + request.url.path.lstrip("/\\")
                response = RedirectResponse(path + (f"?{urlencode(rest)}" if rest else ""), 303)
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
                await response(scope, receive, send_with_headers)
                return
        await self.app(scope, receive, send_with_headers)


def _is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


def _answer(scope: Scope, text: str, status: int) -> Response:
    """A refusal: under /api the API's JSON error like every other answer there, elsewhere plain text."""
    if _is_api(scope.get("path", "")):
        return json_response({"error": text}, status)
    return PlainTextResponse(text, status)


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _not_found(request: Request, exc: Exception) -> Response:
    """A path no route answers: under /api the API's JSON error like every other, elsewhere Starlette's."""
    if _is_api(request.url.path):
        return json_response({"error": "no such API endpoint (GET /api lists them)"}, 404)
    return PlainTextResponse("Not Found", 404)


def create_app(cat: Catalog, *, token: str | None = None, loopback: bool = True) -> ASGIApp:
    """The ASGI app over ``cat``. ``loopback``: only answer requests addressed to a loopback host name
    (a DNS-rebinding page cannot reach it through another name)."""
    ui = Ui.over(cat)
    routes = [Route(path, ui.html(handler)) for path, handler in pages.HANDLERS.items()]
    routes += [Route(path, ui.api(handler)) for path, handler in api.HANDLERS.items()]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(LOOPBACK_HOSTS))] if loopback else []
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={404: _not_found})
    return _Guard(app, token)
