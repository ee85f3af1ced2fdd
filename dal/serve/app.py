"""The ``dal serve`` application: a versioned JSON API (``/api/v1/``) over a catalog, behind bearer tokens and
grants (``dal.catalog.auth``).

Every route but ``/api/v1/health`` needs a valid token (401 otherwise, one answer whatever was wrong with it).
Dataset routes need READ on the dataset: a principal without it gets the very answer a dataset that does not
exist gets (404, close names only among what it may read), and lists hold only what it may read. Admin routes
need MANAGE on ``*`` (403 otherwise). Every pin, admin change and refusal is written to the audit. Request bodies
are bounded (413).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dal.catalog import Catalog
from dal.catalog.auth import ALLOWED, DENIED, MANAGE, READ, AuthStore, Grant, NotAuthorized, allows
from dal.catalog.errors import CatalogError, CatalogUnavailable, DalError, DatasetNotFound, InvalidName, NotFound
from dal.catalog.models import utcnow
from dal.catalog.remote import dataset_json, version_json
from dal.catalog.types import validate_name
from dal.lineage import KEY as LINEAGE_KEY
from dal.serve import writes
from dal.serve.writes import version_ref

MAX_BODY = 64 * 1024
# what writers send (a version's draft with its partitions, lineage with its inputs) may be larger
MAX_WRITE_BODY = 16 * 1024 * 1024
WRITE_PREFIX = "/api/v1/datasets/"
NOT_FOUND = "not_found"
UNAUTHENTICATED = "a valid bearer token is required (Authorization: Bearer dal_...)"
PRUNE_EVERY_S = 3600.0


def _error(status: int, err: BaseException, headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"error": str(err), "type": type(err).__name__}
    if isinstance(err, NotFound):  # close names among what the principal may read (``Server.not_found``)
        body["suggestions"] = list(err.suggestions)
    return JSONResponse(body, status_code=status, headers=headers)


class _Refused(Exception):
    """An answer to send instead of the route's (already audited)."""

    def __init__(self, response: Response) -> None:
        self.response = response


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is answered 413 (declared or streamed)."""

    def __init__(self, app: ASGIApp, limit: int, write_limit: int | None = None) -> None:
        self.app, self.limit = app, limit
        self.write_limit = limit if write_limit is None else write_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        limit = self.write_limit if str(scope.get("path", "")).startswith(WRITE_PREFIX) else self.limit
        too_big = _error(413, DalError(f"request body over {limit:,} bytes"))
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await too_big(scope, receive, send)
            return
        seen = 0

        async def bounded() -> Any:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _Refused(too_big)
            return message

        try:
            await self.app(scope, bounded, send)
        except _Refused as e:
            await e.response(scope, receive, send)


@dataclass
class Server:
    """What the routes share: the catalog, the auth store, the audit's retention."""

    cat: Catalog
    store: AuthStore
    retention: timedelta | None
    pruned: float | None = None  # when the audit was last pruned (monotonic)

    def prune(self) -> None:
        """Drop audit rows beyond the retention: at start, then at most once per ``PRUNE_EVERY_S``."""
        if self.retention is not None and (self.pruned is None or time.monotonic() - self.pruned > PRUNE_EVERY_S):
            self.pruned = time.monotonic()
            self.store.prune_audit(utcnow() - self.retention)

    @staticmethod
    def client(request: Request) -> str:
        peer = request.client.host if request.client else "?"
        return f"{peer} {request.headers.get('x-dal-client', '')}".strip()[:300]

    def principal(self, request: Request, action: str, dataset: str | None = None) -> tuple[str, list[Grant]]:
        """The principal of the request's bearer token and its grants; 401 (audited) without a valid one."""
        header = request.headers.get("authorization", "")
        scheme, _, text = header.partition(" ")
        try:
            if scheme.lower() != "bearer" or not text.strip():
                raise NotAuthorized("no bearer token")
            return self.store.identify(text.strip())
        except NotAuthorized as e:
            self.store.record("", action, DENIED, dataset=dataset, client=self.client(request), detail=str(e))
            raise _Refused(_error(401, NotAuthorized(UNAUTHENTICATED), {"WWW-Authenticate": "Bearer"})) from None

    def not_found(self, name: str, grants: list[Grant]) -> Response:
        """The one answer for a dataset that does not exist and for one the principal may not read."""
        readable = [d.name for d in self.cat.list_datasets() if allows(grants, READ, d.name)]
        return _error(404, DatasetNotFound(f"dataset {name!r}", name, readable))

    def readable(self, request: Request, action: str) -> tuple[str, str, list[Grant]]:
        """(principal, dataset name, grants) of a dataset route where the principal may READ it; else the 404."""
        name = str(request.path_params["name"])
        who, grants = self.principal(request, action, name[:200])
        try:
            validate_name(name)
            allowed = allows(grants, READ, name)
        except InvalidName:
            allowed = False
        if not allowed:
            self.store.record(who, action, DENIED, dataset=name, client=self.client(request), detail="no READ")
            raise _Refused(self.not_found(name, grants))
        return who, name, grants

    def manager(self, request: Request, action: str) -> str:
        """The principal of an admin route: MANAGE on ``*``, else 403 (audited)."""
        who, grants = self.principal(request, action)
        if not allows(grants, MANAGE, "*"):
            self.store.record(who, action, DENIED, client=self.client(request), detail="no MANAGE on *")
            raise _Refused(_error(403, NotAuthorized(f"{who} may not {action}: it needs MANAGE on '*'")))
        return who


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
            return _error(503, e)
        except CatalogError as e:
            return _error(400, e)
        except DalError as e:
            return _error(500, e)

    return Route(path, run, methods=list(methods))


def visible(found: Any, grants: list[Grant]) -> Any:
    """An answer with the lineage records of its versions cut to the inputs the principal may read: a version's
    ``properties["lineage"]["upstream"]`` names the datasets it was written from (``dal.lineage``), and a principal
    hears no name of a dataset it may not read."""
    if isinstance(found, list):
        return [visible(x, grants) for x in found]
    if not isinstance(found, dict):
        return found
    out = {k: visible(v, grants) if k in ("versions", "version") else v for k, v in found.items()}
    record = (out.get("properties") or {}).get(LINEAGE_KEY) if "dataset" in out and "created_at" in out else None
    if isinstance(record, dict) and isinstance(record.get("upstream"), list):
        kept = [u for u in record["upstream"] if isinstance(u, dict) and isinstance(u.get("dataset"), str)
                and allows(grants, READ, u["dataset"])]  # fmt: skip
        out["properties"] = {**out["properties"], LINEAGE_KEY: {**record, "upstream": kept}}
    return out


def _limit(request: Request) -> int | None:
    text = request.query_params.get("limit")
    if text is None:
        return None
    if not text.isdigit() or len(text) > 9:
        raise InvalidName(f"invalid limit {text[:20]!r}: a whole number")
    return int(text)


def _body(raw: bytes) -> dict[str, Any]:
    try:
        found = json.loads(raw or b"{}")
    except ValueError:
        raise CatalogError("the request body is not JSON") from None
    if not isinstance(found, dict):
        raise CatalogError("the request body must be a JSON object")
    return found


# -- datasets -------------------------------------------------------------------------------------------------


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
        return JSONResponse(dataset_json(server.cat.get_dataset(name)))
    except DatasetNotFound:
        return server.not_found(name, grants)


def versions(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "versions")
    try:
        found = server.cat.versions(name, limit=_limit(request))
    except DatasetNotFound:
        return server.not_found(name, grants)
    return JSONResponse(visible({"versions": [version_json(v) for v in found]}, grants))


def tags(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "tags")
    try:
        return JSONResponse({"tags": server.cat.tags(name)})
    except DatasetNotFound:
        return server.not_found(name, grants)


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
    server.store.record(who, "pin", ALLOWED, dataset=name, version=version.number, client=client)
    server.prune()
    return JSONResponse(visible({"dataset": dataset_json(info), "version": version_json(version)}, grants))


# -- admin ----------------------------------------------------------------------------------------------------


def principals(server: Server, request: Request, body: bytes) -> Response:
    server.manager(request, "principals")
    return JSONResponse({"principals": [{"name": p.name, "kind": p.kind} for p in server.store.principals()]})


def create_principal(server: Server, request: Request, body: bytes) -> Response:
    who = server.manager(request, "create principal")
    data = _body(body)
    made = server.store.create_principal(str(data.get("name", "")), str(data.get("kind", "user")))
    server.store.record(who, "create principal", ALLOWED, client=server.client(request), detail=made.name)
    return JSONResponse({"name": made.name, "kind": made.kind}, status_code=201)


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
    return JSONResponse({"token": text, "token_id": token.token_id, "expires_at": expires}, status_code=201)


def revoke_token(server: Server, request: Request, body: bytes) -> Response:
    who = server.manager(request, "revoke token")
    token_id = str(request.path_params["token_id"])
    server.store.revoke_token(token_id)
    server.store.record(who, "revoke token", ALLOWED, client=server.client(request), detail=token_id)
    return JSONResponse({"revoked": token_id})


def list_grants(server: Server, request: Request, body: bytes) -> Response:
    server.manager(request, "grants")
    found = server.store.grants(request.query_params.get("principal"))
    return JSONResponse({"grants": [g.__dict__ for g in found]})


def change_grant(server: Server, request: Request, body: bytes) -> Response:
    revoking = request.url.path.endswith("/revoke")
    action = "revoke" if revoking else "grant"
    who = server.manager(request, action)
    data = _body(body)
    args = (str(data.get("principal", "")), str(data.get("privilege", "")), str(data.get("target", "")))
    if revoking:
        done = server.store.revoke(*args)
    else:
        server.store.grant(*args)
        done = True
    server.store.record(
        who, action, ALLOWED, dataset=args[2][:200], client=server.client(request), detail=" ".join(args)
    )
    return JSONResponse({"principal": args[0], "privilege": args[1].upper(), "target": args[2], "changed": done})


def audit(server: Server, request: Request, body: bytes) -> Response:
    server.manager(request, "audit")
    q = request.query_params
    since = None
    if q.get("since"):
        try:
            since = datetime.fromisoformat(q["since"])
        except ValueError:
            raise CatalogError(f"invalid since {q['since'][:40]!r}: an ISO time") from None
    rows = server.store.audit(
        dataset=q.get("dataset"), principal=q.get("principal"), since=since, limit=_limit(request) or 1000
    )
    return JSONResponse({"audit": [r.to_dict() for r in rows]})


def create_app(
    url: str,
    *,
    audit_retention_days: float | None = 365.0,
    max_body: int = MAX_BODY,
    max_write_body: int = MAX_WRITE_BODY,
) -> ASGIApp:
    """The ``dal serve`` ASGI application over the catalog at ``url`` (which must exist and be up to date)."""
    retention = None if audit_retention_days is None else timedelta(days=audit_retention_days)
    server = Server(Catalog(url, must_exist=True, pooled=True), AuthStore(url, pooled=True), retention)
    server.prune()
    api = "/api/v1"
    routes = [
        _route(f"{api}/health", health, server),
        _route(f"{api}/whoami", whoami, server),
        _route(f"{api}/datasets", list_datasets, server),
        _route(f"{api}/datasets/{{name}}", show, server),
        _route(f"{api}/datasets/{{name}}/versions", versions, server),
        _route(f"{api}/datasets/{{name}}/tags", tags, server),
        _route(f"{api}/datasets/{{name}}/pin", pin, server),
        _route(f"{api}/catalog", writes.catalog, server),
        _route(f"{api}/search", writes.search, server),
        _route(f"{api}/catalog/writable", writes.writable, server),
        _route(f"{api}/datasets/{{name}}", writes.change("create"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}", writes.change("update"), server, ("PATCH",)),
        _route(f"{api}/datasets/{{name}}", writes.change("drop"), server, ("DELETE",)),
        _route(f"{api}/datasets/{{name}}/rename", writes.change("rename"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/versions", writes.change("write"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/tags", writes.change("tag"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/tags/{{tag}}", writes.change("untag"), server, ("DELETE",)),
        _route(f"{api}/datasets/{{name}}/expire", writes.change("expire"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/annotate", writes.change("annotate"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/lineage", writes.change("lineage"), server, ("POST",)),
        _route(f"{api}/datasets/{{name}}/partitions", writes.partitions, server),
        _route(f"{api}/datasets/{{name}}/diff", writes.diff, server),
        _route(f"{api}/datasets/{{name}}/upstream", writes.lineage, server),
        _route(f"{api}/datasets/{{name}}/downstream", writes.lineage, server),
        _route(f"{api}/admin/principals", principals, server),
        _route(f"{api}/admin/principals", create_principal, server, ("POST",)),
        _route(f"{api}/admin/tokens", create_token, server, ("POST",)),
        _route(f"{api}/admin/tokens/{{token_id}}", revoke_token, server, ("DELETE",)),
        _route(f"{api}/admin/grants", list_grants, server),
        _route(f"{api}/admin/grants", change_grant, server, ("POST",)),
        _route(f"{api}/admin/grants/revoke", change_grant, server, ("POST",)),
        _route(f"{api}/admin/audit", audit, server),
    ]

    async def unknown(request: Request, exc: Exception) -> Response:
        status = int(getattr(exc, "status_code", 500))
        return _error(status, DalError("no such route" if status in (404, 405) else "internal error"))

    app = Starlette(routes=routes, exception_handlers={404: unknown, 405: unknown, 500: unknown})
    app.state.server = server
    return BodyLimit(app, max_body, max_write_body)
