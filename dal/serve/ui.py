"""The web UI of ``dal serve``: ``dal.ui``'s pages (``/``, ``/d/NAME``, …) and their JSON API (``/api/…``, beside
the server's own ``/api/v1/``) over the served catalog, behind its principals.

A principal signs in with its token on ``/signin`` (a form, POST): the token is checked by the ``AuthStore`` (hashed,
compared in constant time) and kept in an HttpOnly, SameSite=Strict cookie (Secure over TLS), never in an address
or a page; ``/signout`` (POST) clears it. The UI's JSON takes ``Authorization: Bearer`` too. Both forms carry an
anti-forgery value that must match a cookie of its own (and ``HostCheck`` refuses a POST from another origin).
Every request is identified again (a revoked or expired token is signed out at once): without a valid token a
page is the sign-in page (401) and the JSON a 401. A signed-in principal's requests get a ``Ui`` whose ``Scope``
is its grants' targets: the one filter every page and JSON route passes (``dal.ui.web``).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from dal.catalog.auth import ALLOWED, DENIED, Grant, NotAuthorized
from dal.serve.common import Server
from dal.ui import api, pages
from dal.ui.app import SECURITY_HEADERS
from dal.ui.web import Scope, Ui

SESSION_COOKIE = "dal_session"
CSRF_COOKIE = "dal_csrf"
UNAUTHENTICATED = "a valid token is needed: sign in on /signin, or send 'Authorization: Bearer TOKEN'"
INVALID = "that token is not valid (unknown, expired or revoked): ask whoever manages the catalog for one"
FORGED = "the sign-in form was stale or sent from another page: sign in again"
MAX_FORM = 4096  # a token, an anti-forgery value and a path
# dal ui's headers, but for the referrer policy: under no-referrer a browser sends 'Origin: null' with a form's POST,
# which HostCheck refuses as another origin; same-origin still sends nothing to another site
HEADERS = {**SECURITY_HEADERS, "referrer-policy": "same-origin"}


def _bearer(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _local(path: str) -> str:
    """Where to go after signing in: a path of this site only (``//host`` or ``/\\host`` is another site to a
    browser), never the sign-in or sign-out page."""
    if (
        not path.startswith("/")
        or path.startswith(("//", "/\\"))
        or len(path) > 2000
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in path)
        or path.split("?")[0] in ("/signin", "/signout")
    ):
        return "/"
    return path


def _same(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(str(a).encode(), str(b).encode())


class WebUi:
    """The UI's routes over one ``Server``: sign-in, sign-out, and every ``dal.ui`` page and JSON route, each
    answering with the ``Ui`` of the request's principal."""

    def __init__(self, server: Server) -> None:
        self.server = server
        # the header shows no catalog URL: the database's host and name are the server's business, not a reader's
        self.ui = replace(Ui.over(server.cat), catalog_url="")

    def routes(self) -> list[Route]:
        out = [
            Route("/signin", self._guarded(self.signin_form), methods=["GET"]),
            Route("/signin", self._guarded(self.signin), methods=["POST"]),
            Route("/signout", self._guarded(self.signout), methods=["POST"]),
        ]
        out += [Route(path, self._guarded(self._view(False, h))) for path, h in pages.HANDLERS.items()]
        out += [Route(path, self._guarded(self._view(True, h))) for path, h in api.HANDLERS.items()]
        return out

    # -- who is asking --------------------------------------------------------------------------------------

    def viewer(self, request: Request) -> tuple[str, list[Grant]] | None:
        """The principal of the request's bearer token (the JSON), else of its session cookie, and its grants;
        None (audited) without a valid one."""
        header = request.headers.get("authorization")
        text = _bearer(header) if header is not None else request.cookies.get(SESSION_COOKIE)
        try:
            if not text:
                raise NotAuthorized("no token")
            return self.server.store.identify(text)
        except NotAuthorized as e:
            self.server.store.record("", "ui", DENIED, client=self.server.client(request), detail=str(e))
            return None

    def _view(self, json: bool, handler: Any) -> Callable[[Request], Response]:
        """A page (``json`` False) or JSON route answered with the ``Ui`` of the request's principal."""

        def endpoint(request: Request) -> Response:
            found = self.viewer(request)
            if found is None:
                if json:
                    return JSONResponse({"error": UNAUTHENTICATED}, 401, headers={"WWW-Authenticate": "Bearer"})
                query = f"?{request.url.query}" if request.url.query else ""
                response = self._form(request, 401, None, request.url.path + query)
                if SESSION_COOKIE in request.cookies:  # revoked or expired: the browser forgets it
                    response.delete_cookie(SESSION_COOKIE, path="/", secure=request.url.scheme == "https",
                                           httponly=True, samesite="strict")  # fmt: skip
                return response
            who, grants = found
            csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
            ui = replace(self.ui, scope=Scope(tuple(g.target for g in grants)), who=who, csrf=csrf)
            response = (ui.api if json else ui.html)(handler)(request)
            if not json and request.cookies.get(CSRF_COOKIE) != csrf:  # the sign-out form's value
                self._set(request, response, CSRF_COOKIE, csrf)
            return response

        return endpoint

    # -- signing in and out ---------------------------------------------------------------------------------

    def _form(self, request: Request, status: int, message: str | None, next_path: str = "/") -> Response:
        csrf = secrets.token_urlsafe(32)
        response = self.ui.page("signin.html", status, message=message, csrf_field=csrf, next=_local(next_path))
        self._set(request, response, CSRF_COOKIE, csrf)
        if status == 401:
            response.headers["www-authenticate"] = 'Bearer realm="dal"'
        return response

    def signin_form(self, request: Request) -> Response:
        return self._form(request, 200, None, request.query_params.get("next") or "/")

    async def _fields(self, request: Request) -> dict[str, str]:
        raw = await request.body()
        return dict(parse_qsl(raw[:MAX_FORM].decode("utf-8", "replace"), keep_blank_values=True))

    async def signin(self, request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool

        fields = await self._fields(request)
        next_path = fields.get("next") or "/"
        if not _same(request.cookies.get(CSRF_COOKIE), fields.get("csrf")):
            return self._form(request, 403, FORGED, next_path)
        token = fields.get("token", "").strip()
        try:
            if not token:
                raise NotAuthorized("no token")
            who, _grants = await run_in_threadpool(self.server.store.identify, token)
        except NotAuthorized as e:
            await run_in_threadpool(self.server.store.record, "", "ui sign-in", DENIED,
                                    client=self.server.client(request), detail=str(e))  # fmt: skip
            return self._form(request, 401, INVALID, next_path)
        await run_in_threadpool(
            self.server.store.record, who, "ui sign-in", ALLOWED, client=self.server.client(request)
        )
        response = RedirectResponse(_local(next_path), 303)
        self._set(request, response, SESSION_COOKIE, token)
        self._set(request, response, CSRF_COOKIE, secrets.token_urlsafe(32))  # a new one for the signed-in pages
        return response

    async def signout(self, request: Request) -> Response:
        fields = await self._fields(request)
        if not _same(request.cookies.get(CSRF_COOKIE), fields.get("csrf")):
            return self._form(request, 403, FORGED)
        response = RedirectResponse("/signin", 303)
        secure = request.url.scheme == "https"
        for name in (SESSION_COOKIE, CSRF_COOKIE):
            response.delete_cookie(name, path="/", secure=secure, httponly=True, samesite="strict")
        return response

    @staticmethod
    def _set(request: Request, response: Response, name: str, value: str) -> None:
        """A browser-session cookie no script reads, sent only to this site's own pages, over TLS only with TLS."""
        response.set_cookie(name, value, path="/", httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")  # fmt: skip

    @staticmethod
    def _guarded(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """The endpoint with the UI's security headers (a strict CSP: no script at all, no framing, no caching)."""
        import inspect

        if inspect.iscoroutinefunction(endpoint):

            async def run_async(request: Request) -> Response:
                return _headers(await endpoint(request))

            return run_async

        def run(request: Request) -> Response:
            return _headers(endpoint(request))

        return run


def _headers(response: Response) -> Response:
    for key, value in HEADERS.items():
        response.headers.setdefault(key, value)
    return response
