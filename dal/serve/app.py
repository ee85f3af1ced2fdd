"""The ``dal serve`` application: a versioned JSON API (``/api/v1/``) over a catalog, behind bearer tokens and
grants (``dal.catalog.auth``), and the web UI (``dal.serve.ui``: pages and their JSON, signed in with a token).

Every route but ``/api/v1/health`` needs a valid token (401 otherwise, one answer whatever was wrong with it).
Dataset routes need READ on the dataset: a principal without it gets the very answer a dataset that does not
exist gets (404, close names only among what it may read), and lists hold only what it may read. The principal
and token routes need MANAGE on ``*``; grant and revoke MANAGE on the target or a namespace around it, and grants
and audit answer what lies within what the caller manages; 403 otherwise. Every pin, admin change and refusal is
written to the audit. Request bodies are bounded in size (413) and in time (408: ``dal.serve.slow``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dal.catalog import Catalog
from dal.catalog.auth import ALLOWED, DENIED, READ, WRITE, AuthStore, Grant, NotAuthorized, allows, manages
from dal.catalog.errors import (
    CatalogError,
    CatalogReadOnly,
    CatalogUnavailable,
    DalError,
    DatasetNotFound,
    InvalidName,
    NotFound,
)
from dal.catalog.remote import dataset_json, version_json
from dal.catalog.types import labels_dict
from dal.serve import browse, proof, writes
from dal.serve.common import NOT_FOUND, Server, _body, _error, _limit, _Refused, etagged, holds, visible
from dal.serve.vending import CannotVend, Vending, vend
from dal.serve.writes import version_ref

_log = logging.getLogger("dal.serve")
# what a client hears of the server's database trouble (the server's log has the details: never its URL)
UNAVAILABLE = "the catalog server's database is unavailable; try again later"
READ_ONLY = "the catalog server's database role cannot record changes (it can read them)"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_BODY = 64 * 1024
# what writers send (a version's draft with its partitions, lineage with its inputs) may be larger
MAX_WRITE_BODY = 16 * 1024 * 1024
WRITE_PREFIX = "/api/v1/datasets/"


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is answered 413 (declared or streamed), one not all
    received ``timeout`` seconds after the app starts reading it 408 (a slow client: ``dal.serve.slow``); both close
    the connection."""

    def __init__(self, app: ASGIApp, limit: int, write_limit: int | None = None, timeout: float | None = None) -> None:
        self.app, self.limit, self.timeout = app, limit, timeout
        self.write_limit = limit if write_limit is None else write_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        limit = self.write_limit if str(scope.get("path", "")).startswith(WRITE_PREFIX) else self.limit
        closing = {"Connection": "close"}  # what is left of the body is never read: the connection cannot be reused
        too_big = _error(413, DalError(f"request body over {limit:,} bytes"), closing)
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await too_big(scope, receive, send)
            return
        seen, deadline, complete = 0, None, False
        loop = asyncio.get_running_loop()

        async def bounded() -> Any:
            nonlocal seen, deadline, complete
            if complete or self.timeout is None:
                message = await receive()
            else:
                deadline = loop.time() + self.timeout if deadline is None else deadline
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    slow = DalError(f"the request body was not received within {self.timeout:g} s")
                    raise _Refused(_error(408, slow, closing)) from None
            complete = complete or not message.get("more_body", False)
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _Refused(too_big)
            return message

        try:
            await self.app(scope, bounded, send)
        except _Refused as e:
            await e.response(scope, receive, send)


CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _host_of(value: str) -> str:
    """The host of a ``Host`` header or an origin's authority, lower case, without the port (IPv6 unbracketed)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class HostCheck:
    """ASGI middleware: a request whose ``Host`` is not one of ``allowed`` (DNS rebinding) is answered 421, and a
    state-changing request (POST, PUT, PATCH, DELETE) whose ``Origin`` is another site (a browser page elsewhere)
    403 — both as JSON. ``allowed`` holding ``*`` lets any host through (the Origin check stays)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app, self.allowed = app, frozenset(_host_of(h) for h in allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        host = headers.get("host", "")
        refusal = None
        if "*" not in self.allowed and _host_of(host) not in self.allowed:
            refusal = _error(421, DalError("this server does not answer for that host name (dal serve --allowed-host)"))
        origin = headers.get("origin")
        if refusal is None and origin is not None and scope.get("method") in CHANGING:
            import urllib.parse

            parsed = urllib.parse.urlsplit(origin)
            same = parsed.scheme in ("http", "https") and parsed.netloc.lower() == host.strip().lower()
            if not same:
                refusal = _error(403, DalError("a change from another origin is refused"))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


Endpoint = Callable[[Server, Request, bytes], Response]


def _route(path: str, endpoint: Endpoint, server: Server, methods: tuple[str, ...] = ("GET",)) -> Route:
    async def run(request: Request) -> Response:
        try:
            body = await request.body() if request.method in ("POST", "PATCH", "DELETE") else b""
            return await run_in_threadpool(endpoint, server, request, body)
        except _Refused as e:
            return e.response
        except NotFound as e:
            return _error(404, e)
        except (InvalidName, NotAuthorized) as e:
            return _error(400 if isinstance(e, InvalidName) else 403, e)
        except CatalogUnavailable as e:
            # the server's own trouble: its log has the details, a client hears no database URL (security.md)
            _log.warning("dal serve: %s %s: %s", request.method, request.url.path, e)
            return _error(503, CatalogUnavailable(UNAVAILABLE))
        except CatalogReadOnly as e:
            _log.warning("dal serve: %s %s: %s", request.method, request.url.path, e)
            return _error(400, CatalogReadOnly(READ_ONLY))
        except CatalogError as e:
            return _error(400, e)
        except DalError as e:
            return _error(500, e)

    return Route(path, run, methods=list(methods))


def health(server: Server, request: Request, body: bytes) -> Response:
    return JSONResponse({"ok": True, "api": "v1"})


def whoami(server: Server, request: Request, body: bytes) -> Response:
    who, grants = server.principal(request, "whoami")
    return JSONResponse({"principal": who, "grants": [g.__dict__ for g in grants]})


def list_datasets(server: Server, request: Request, body: bytes) -> Response:
    _who, grants = server.principal(request, "list")
    pattern, limit = request.query_params.get("pattern"), _limit(request)
    found = [d for d in server.cat.list_datasets(pattern) if allows(grants, READ, d.name)]
    found = found[:limit] if limit is not None else found
    names = {d.name for d in found}
    sizes = {k: v for k, v in server.cat.latest_sizes(pattern).items() if k in names}
    return JSONResponse({"datasets": [dataset_json(d) for d in found], "sizes": sizes})


def show(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "show")
    try:
        return etagged(
            request, {**dataset_json(server.cat.get_dataset(name)), "labels": labels_dict(server.cat.labels(name))}
        )
    except DatasetNotFound:
        return server.not_found(name, grants)


def versions(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "versions")
    try:
        found = server.cat.versions(name, limit=_limit(request))
    except DatasetNotFound:
        return server.not_found(name, grants)
    return etagged(request, visible({"versions": [version_json(v) for v in found]}, grants))


def tags(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "tags")
    try:
        return JSONResponse({"tags": server.cat.tags(name)})
    except DatasetNotFound:
        return server.not_found(name, grants)


def co_located(server: Server, request: Request, body: bytes) -> Response:
    """Whether other datasets are at, inside or around the dataset's location (``Catalog.co_located``; ``shared``)
    and those the principal may read, by name — never a count: a write, gc or purge refuses while any is."""
    _who, name, grants = server.readable(request, "co-located")
    try:
        others = server.cat.co_located(name)
    except DatasetNotFound:
        return server.not_found(name, grants)
    return JSONResponse({"shared": bool(others), "datasets": [o for o in others if holds(grants, READ, o)]})


def overlapping(server: Server, request: Request, body: bytes) -> Response:
    """Whether a dataset is at, inside or around ``?location=`` besides ``?besides=``, the dataset about to be
    written, on which the principal must hold WRITE (else the one 403): a first write asks before it writes data
    (the create would refuse). Answers ``taken`` and the names among them the principal may read — never a
    count, so nobody learns how many datasets it cannot read there are."""
    name = request.query_params.get("besides", "")
    _who, grants = writes.may(server, request, "write", WRITE, name)
    location = request.query_params.get("location", "")
    if not location or len(location) > 10_000:
        raise CatalogError("name a location (at most 10,000 characters)")
    others = server.cat.overlapping(location, besides=name)
    return JSONResponse({"taken": bool(others), "datasets": [o for o in others if holds(grants, READ, o)]})


def pin(server: Server, request: Request, body: bytes) -> Response:
    """The dataset and the version ``?version=`` names (``time=1``: an ISO time, never a tag): audited."""
    who, name, grants = server.readable(request, "pin")
    ref = version_ref(request.query_params.get("version"), request.query_params.get("time"))
    client = server.client(request)
    try:
        info = server.cat.get_dataset(name)
        version = server.cat.version(name, ref)
    except DatasetNotFound:
        server.store.record(who, "pin", NOT_FOUND, dataset=name, client=client, detail="no such dataset")
        return server.not_found(name, grants)
    except NotFound as e:
        server.store.record(who, "pin", NOT_FOUND, dataset=name, client=client, detail=str(e)[:200])
        raise
    try:
        offered = vend(server.vending, name, info.location)
    except CannotVend as e:
        server.store.record(who, "pin", DENIED, dataset=name, version=version.number, client=client,
                            detail=str(e)[:200])  # fmt: skip
        raise
    credentials = proof.checked(server.cat.catalog_id, proof.names_of(info.properties, name), info.location, offered,
                                lambda: server.cat.co_located(name))  # fmt: skip
    detail = (proof.UNPROVEN if offered is not None else "") if credentials is None else (
        f"vended {credentials['access']} {credentials['scope']}"[:200])  # fmt: skip
    server.store.record(who, "pin", ALLOWED, dataset=name, version=version.number, client=client, detail=detail)
    server.prune()
    answer = visible({"dataset": dataset_json(info), "version": version_json(version)}, grants)
    if credentials is None:
        return etagged(request, answer)
    # vended credentials are new on every pin: never a 304 (the client would keep old ones), never cached
    return JSONResponse({**answer, "credentials": credentials}, headers={"Cache-Control": "no-store"})


# -- admin ----------------------------------------------------------------------------------------------------


def principals(server: Server, request: Request, body: bytes) -> Response:
    server.manager(request, "principals")
    found = server.store.principals()
    return JSONResponse({"principals": [{"name": p.name, "kind": p.kind, "created_at": p.created_at.isoformat()}
                                        for p in found]})  # fmt: skip


def create_principal(server: Server, request: Request, body: bytes) -> Response:
    who = server.manager(request, "create principal")
    data = _body(body)
    made = server.store.create_principal(str(data.get("name", "")), str(data.get("kind", "user")))
    server.store.record(who, "create principal", ALLOWED, client=server.client(request), detail=made.name)
    return JSONResponse(
        {"name": made.name, "kind": made.kind, "created_at": made.created_at.isoformat()}, status_code=201
    )


def create_token(server: Server, request: Request, body: bytes) -> Response:
    who = server.manager(request, "create token")
    data = _body(body)
    days = data.get("expires_days")
    if days is not None and (not isinstance(days, int | float) or isinstance(days, bool) or not 0 < days <= 3650):
        raise CatalogError("expires_days must be a number of days between 0 and 3650")
    text, token = server.store.create_token(
        str(data.get("principal", "")), expires_in=None if days is None else timedelta(days=days)
    )
    detail = f"{token.principal} {token.token_id}"
    server.store.record(who, "create token", ALLOWED, client=server.client(request), detail=detail)
    expires = token.expires_at.isoformat() if token.expires_at else None
    answer = {"token": text, "token_id": token.token_id, "principal": token.principal,
              "created_at": token.created_at.isoformat(), "expires_at": expires}  # fmt: skip
    return JSONResponse(answer, status_code=201)


def list_tokens(server: Server, request: Request, body: bytes) -> Response:
    """Tokens (ids, never secrets), of one principal (``?principal=``) or all."""
    server.manager(request, "tokens")
    found = server.store.tokens(request.query_params.get("principal"))
    return JSONResponse({"tokens": [{"token_id": t.token_id, "principal": t.principal,
                                     "created_at": t.created_at.isoformat(),
                                     "expires_at": t.expires_at.isoformat() if t.expires_at else None,
                                     "revoked": t.revoked} for t in found]})  # fmt: skip


def revoke_token(server: Server, request: Request, body: bytes) -> Response:
    who = server.manager(request, "revoke token")
    token_id = str(request.path_params["token_id"])
    server.store.revoke_token(token_id)
    server.store.record(who, "revoke token", ALLOWED, client=server.client(request), detail=token_id)
    return JSONResponse({"revoked": token_id})


def list_grants(server: Server, request: Request, body: bytes) -> Response:
    """The grants on targets within what the caller manages (all of them for MANAGE on ``*``)."""
    who, grants = server.principal(request, "grants")
    server.manages(request, "grants", who, grants)
    found = server.store.grants(request.query_params.get("principal"))
    return JSONResponse({"grants": [g.__dict__ for g in found if manages(grants, g.target)]})


def change_grant(server: Server, request: Request, body: bytes) -> Response:
    revoking = request.url.path.endswith("/revoke")
    action = "revoke" if revoking else "grant"
    who, grants = server.principal(request, action)
    data = _body(body)
    args = (str(data.get("principal", "")), str(data.get("privilege", "")), str(data.get("target", "")))
    server.manages(request, action, who, grants, args[2])  # MANAGE on the target or a namespace around it
    try:
        if revoking:
            done = server.store.revoke(*args)
        else:
            server.store.grant(*args)
            done = True
    except NotFound:
        if manages(grants, "*"):
            raise
        # only who may list the principals hears close names of theirs
        raise NotFound(f"principal {args[0][:200]!r}") from None
    server.store.record(
        who, action, ALLOWED, dataset=args[2][:200], client=server.client(request), detail=" ".join(args)
    )
    return JSONResponse({"principal": args[0], "privilege": args[1].upper(), "target": args[2], "changed": done})


def audit(server: Server, request: Request, body: bytes) -> Response:
    """Audit rows: of the datasets within what the caller manages (every row for MANAGE on ``*``)."""
    who, grants = server.principal(request, "audit")
    q = request.query_params
    scope = server.manages(request, "audit", who, grants, q.get("dataset"))
    since = None
    if q.get("since"):
        try:
            since = datetime.fromisoformat(q["since"])
        except ValueError:
            raise CatalogError(f"invalid since {q['since'][:40]!r}: an ISO time") from None
    rows = server.store.audit(
        dataset=q.get("dataset"),
        principal=q.get("principal"),
        since=since,
        limit=_limit(request) or 1000,
        scope=scope,
    )
    return JSONResponse({"audit": [_within(r.to_dict(), grants) for r in rows]})


def _within(row: dict[str, Any], grants: list[Grant]) -> dict[str, Any]:
    """An audit row as a caller shown it: a rename's other name only when the caller may read it (a namespace
    manager sees its datasets' rows, and hears no name outside what it may read)."""
    detail = str(row.get("detail") or "")
    if row.get("action") != "rename" or manages(grants, "*"):
        return row
    if row.get("outcome") == ALLOWED:
        return (
            row
            if allows(grants, READ, detail.removeprefix("to "))
            else {**row, "detail": "to a dataset you may not read"}
        )
    if row.get("outcome") == writes.FAILED:  # the catalog's message may name the other dataset
        return {**row, "detail": "(not shown: it may name a dataset you may not read)"}
    return row


def create_app(
    url: str,
    *,
    audit_retention_days: float | None = 365.0,
    max_body: int = MAX_BODY,
    max_write_body: int = MAX_WRITE_BODY,
    allowed_hosts: frozenset[str] | None = None,
    vending: Vending | None = None,
    body_timeout: float | None = None,
    web_ui: bool = True,
) -> ASGIApp:
    """The ``dal serve`` ASGI application over the catalog at ``url`` (which must exist and be up to date).

    ``allowed_hosts``: the host names requests may name (``HostCheck``); None: loopback's only. ``vending``: the
    storage credentials pins vend (``dal.serve.vending``). ``body_timeout``: seconds a request body may take (None:
    unbounded; ``dal serve`` bounds it, ``dal.serve.slow``). ``web_ui``: serve the web UI too (``dal.serve.ui``).
    """
    retention = None if audit_retention_days is None else timedelta(days=audit_retention_days)
    server = Server(Catalog(url, must_exist=True, pooled=True), AuthStore(url, pooled=True), retention,
                    vending=vending or Vending())  # fmt: skip
    server.prune()
    api = "/api/v1"
    routes = [
        _route(f"{api}/health", health, server),
        _route(f"{api}/whoami", whoami, server),
        _route(f"{api}/datasets", list_datasets, server),
        _route(f"{api}/datasets/{{name}}", show, server),
        _route(f"{api}/datasets/{{name}}/versions", versions, server),
        _route(f"{api}/datasets/{{name}}/tags", tags, server),
        _route(f"{api}/datasets/{{name}}/co-located", co_located, server),
        _route(f"{api}/locations/overlapping", overlapping, server),
        _route(f"{api}/datasets/{{name}}/pin", pin, server),
        _route(f"{api}/catalog", writes.catalog, server),
        _route(f"{api}/search", writes.search, server),
        _route(f"{api}/search/facets", browse.facets, server),
        _route(f"{api}/labelled", browse.labelled, server),
        _route(f"{api}/catalog/writable", writes.writable, server),
        _route(f"{api}/datasets/{{name}}", writes.change("create"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}", writes.change("update"), server, ("PATCH",)),
        _route(f"{api}/datasets/{{name}}", writes.change("drop"), server, ("DELETE",)),
        _route(f"{api}/datasets/{{name}}/rename", writes.change("rename"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/versions", writes.change("write"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/writes", writes.begin_write, server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/tags", writes.change("tag"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/tags/{{tag}}", writes.change("untag"), server, ("DELETE",)),
        _route(f"{api}/datasets/{{name}}/expire", writes.change("expire"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/annotate", writes.change("annotate"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/lineage", writes.change("lineage"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/labels", writes.change("label"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/labels/remove", writes.change("unlabel"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/partitions", writes.partitions, server),
        _route(f"{api}/datasets/{{name}}/diff", writes.diff, server),
        _route(f"{api}/datasets/{{name}}/upstream", writes.lineage, server),
        _route(f"{api}/datasets/{{name}}/downstream", writes.lineage, server),
        _route(f"{api}/admin/principals", principals, server),
        _route(f"{api}/admin/principals", create_principal, server, ("POST",)),
        _route(f"{api}/admin/tokens", list_tokens, server),
        _route(f"{api}/admin/tokens", create_token, server, ("POST",)),
        _route(f"{api}/admin/tokens/{{token_id}}", revoke_token, server, ("DELETE",)),
        _route(f"{api}/admin/grants", list_grants, server),
        _route(f"{api}/admin/grants", change_grant, server, ("POST",)),
        _route(f"{api}/admin/grants/revoke", change_grant, server, ("POST",)),
        _route(f"{api}/admin/audit", audit, server),
    ]
    if web_ui:  # the web UI's pages and its JSON (/api/…, never /api/v1/…), behind the same principals
        from dal.serve.ui import WebUi

        routes += WebUi(server).routes()

    async def unknown(request: Request, exc: Exception) -> Response:
        status = int(getattr(exc, "status_code", 500))
        return _error(status, DalError("no such route" if status in (404, 405) else "internal error"))

    app = Starlette(routes=routes, exception_handlers={404: unknown, 405: unknown, 500: unknown})
    app.state.server = server
    hosts = allowed_hosts if allowed_hosts is not None else LOOPBACK_NAMES
    return HostCheck(BodyLimit(app, max_body, max_write_body, body_timeout), hosts)
