"""What the routes of ``dal serve`` share: the ``Server`` (catalog, auth store, audit), refusals and error answers,
request bodies and limits, ETags, and the filter that keeps names a principal may not read out of answers."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from dal.catalog import Catalog
from dal.catalog.auth import DENIED, MANAGE, PRIVILEGES, READ, AuthStore, Grant, NotAuthorized, allows, manages
from dal.catalog.errors import CatalogError, DatasetNotFound, InvalidName, NotFound
from dal.catalog.models import utcnow
from dal.catalog.types import validate_name
from dal.lineage import KEY as LINEAGE_KEY
from dal.serve.vending import Vending

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


@dataclass
class Server:
    """What the routes share: the catalog, the auth store, the audit's retention."""

    cat: Catalog
    store: AuthStore
    retention: timedelta | None
    pruned: float | None = None  # when the audit was last pruned (monotonic)
    vending: Vending = field(default_factory=Vending)  # storage credentials vended with pins (dal.serve.vending)

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
        if not holds(grants, READ, name):
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

    def manages(
        self, request: Request, action: str, who: str, grants: list[Grant], target: str | None = None
    ) -> list[str]:
        """The targets ``who`` manages (its MANAGE grants' targets), when it manages ``target`` (None: anything);
        else 403 (audited). The refusal is the same whether or not a dataset under ``target`` exists."""
        scope = [g.target for g in grants if g.privilege == MANAGE]
        if scope if target is None else manages(grants, target):
            return scope
        where = "anything" if target is None else repr(target[:200])
        self.store.record(who, action, DENIED, dataset=None if target is None else target[:200],
                          client=self.client(request), detail=f"no MANAGE on {where}")  # fmt: skip
        needs = "MANAGE on a dataset, a namespace or '*'" if target is None else f"MANAGE on {where} or around it"
        raise _Refused(_error(403, NotAuthorized(f"{who} may not {action}: it needs {needs}")))


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


def read_targets(grants: list[Grant]) -> list[str]:
    """The targets of the grants that give READ (each privilege includes it): the catalog's searches, counts and
    facets take them as ``within``, so that only datasets the principal may read are found and counted."""
    return [g.target for g in grants if PRIVILEGES.index(g.privilege) >= PRIVILEGES.index(READ)]


def holds(grants: list[Grant], privilege: str, name: str) -> bool:
    """Whether ``grants`` give ``privilege`` on the dataset ``name`` (an invalid name: no one's)."""
    try:
        validate_name(name)
    except InvalidName:
        return False
    return allows(grants, privilege, name)


def etagged(request: Request, content: Any) -> Response:
    """A JSON answer with a strong ETag (a hash of exactly what this principal is shown); 304 when the request's
    ``If-None-Match`` names it. ``Cache-Control: private, no-cache``: a client keeps it, and asks again."""
    answer = JSONResponse(content)
    tag = '"' + hashlib.sha256(answer.body).hexdigest()[:32] + '"'
    headers = {"ETag": tag, "Cache-Control": "private, no-cache"}
    wanted = [t.strip().removeprefix("W/") for t in request.headers.get("if-none-match", "").split(",")]
    if tag in wanted or "*" in wanted:
        return Response(status_code=304, headers=headers)
    answer.headers.update(headers)
    return answer


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
