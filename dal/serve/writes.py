"""The routes of ``dal serve`` that change the catalog, and the reads writers and lineage need.

Each is ``Catalog``'s method of the same name, run on the server after the grant is checked: WRITE on the dataset to
create, update, publish, tag, untag, label, unlabel, annotate and record lineage; MANAGE to rename (on both names), drop and expire.
A principal without the privilege gets one answer (403) whether or not the dataset exists; one with it gets the
catalog's own errors (a missing dataset: the 404 that names close names only among what it may read). Every change,
refusal and failure is audited (principal, action, dataset, version, client).

Lineage read here is filtered by grants: an edge to or from a dataset the principal may not read is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from dal.catalog.auth import ALLOWED, DENIED, MANAGE, READ, WRITE, Grant, NotAuthorized, allows
from dal.catalog.errors import CatalogError, DatasetNotFound, InvalidName
from dal.catalog.remote import (
    dataset_json,
    draft_from,
    edge_json,
    input_from,
    partition_json,
    version_json,
)
from dal.catalog.types import labels_dict
from dal.serve.common import Server, _body, _error, _limit, _Refused, holds, visible

FAILED = "failed"


def _refused(status: int, err: Exception) -> Exception:
    return _Refused(_error(status, err))


def version_ref(version: str | None, time: str | None) -> Any:
    """A version reference from the wire (``ref_params``): None, the text, or (``time == '1'``) a datetime."""
    if version is not None and time == "1":
        try:
            return datetime.fromisoformat(version)
        except ValueError:
            raise InvalidName(f"invalid version {version[:60]!r}: not an ISO time") from None
    return version


def _json(value: object, what: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CatalogError(f"{what} has the wrong type ({type(value).__name__})")
    return value


def _numbers(value: object) -> list[int]:
    items = _json(value, "numbers", list)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in items):
        raise CatalogError("numbers must be a list of version numbers")
    return list(items)


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(_json(value, key, str))


# (action, privilege, what it does: (server, principal, name, body) -> (JSON answer, version for the audit))
Change = Callable[[Server, str, str, dict[str, Any]], tuple[Any, int | None]]


def _create(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    owner = _opt_str(d, "owner")
    info = server.cat.create_dataset(
        name,
        format=str(_json(d.get("format"), "format", str)),
        location=str(_json(d.get("location"), "location", str)),
        description=str(_json(d.get("description", ""), "description", str)),
        owner=owner if owner is not None else who,
        time_column=_opt_str(d, "time_column"),
        properties=_json(d.get("properties") or {}, "properties", dict),
        exist_ok=bool(d.get("exist_ok")),
        unique_location=bool(d.get("unique_location")),
    )
    return dataset_json(info), None


def _update(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    props = d.get("properties")
    info = server.cat.update_dataset(
        name,
        description=_opt_str(d, "description"),
        time_column=_opt_str(d, "time_column"),
        owner=_opt_str(d, "owner"),
        properties=None if props is None else _json(props, "properties", dict),
        clear_time_column=bool(d.get("clear_time_column")),
    )
    return dataset_json(info), None


def _rename(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    return dataset_json(server.cat.rename_dataset(name, str(_json(d.get("new_name"), "new_name", str)))), None


def _drop(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    server.cat.delete_dataset(name)
    return {"dropped": name}, None


def _publish(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    """One draft (the body is the draft), or ``{"drafts": [...], "skip_recorded": bool}``: ``publish_many``, one
    transaction (what register and sync send)."""
    if "drafts" not in d:
        v = server.cat.publish(name, draft_from(d))
        return version_json(v), v.number
    drafts = [draft_from(_json(x, "drafts[]", dict)) for x in _json(d["drafts"], "drafts", list)]
    found = server.cat.publish_many(name, drafts, skip_recorded=bool(d.get("skip_recorded")))
    return {"versions": [version_json(v) for v in found]}, (found[-1].number if found else None)


def _tag(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    ref = version_ref(_opt_str(d, "version"), _opt_str(d, "time"))
    v = server.cat.tag(name, ref, str(_json(d.get("tag"), "tag", str)), force=bool(d.get("force")))
    return version_json(v), v.number


def _untag(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    server.cat.untag(name, str(d["tag"]))
    return {"untagged": d["tag"]}, None


def _expire(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    reason = str(_json(d.get("reason"), "reason", str))
    done = server.cat.expire_versions(name, _numbers(d.get("numbers")), reason)
    return {"versions": [version_json(v) for v in done]}, None


def _annotate(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    key = str(_json(d.get("key"), "key", str))
    if "number" in d:
        number = _json(d["number"], "number", int)
        return version_json(server.cat.annotate_version(name, number, key, d.get("value"))), number
    server.cat.annotate_versions(name, _numbers(d.get("numbers")), key, d.get("value"))
    return {"annotated": True}, None


def _lineage(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    number = _json(d.get("number"), "number", int)
    inputs = [input_from(_json(i, "an input", dict)) for i in _json(d.get("inputs") or [], "inputs", list)]
    record = _json(d.get("record") or {}, "record", dict)
    v = server.cat.record_lineage(name, number, str(_json(d.get("key"), "key", str)), record, inputs)
    return version_json(v), v.number


def _label(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    """``{"label": "key[=value]", "column": str | None}``: ``Catalog.label``; every label afterwards."""
    text, column = str(_json(d.get("label"), "label", str)), _opt_str(d, "column")
    return {"labels": labels_dict(server.cat.label(name, text, column=column))}, None


def _unlabel(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    text, column = str(_json(d.get("label"), "label", str)), _opt_str(d, "column")
    return {"labels": labels_dict(server.cat.unlabel(name, text, column=column))}, None


CHANGES: dict[str, tuple[str, Change]] = {
    "create": (WRITE, _create),
    "update": (WRITE, _update),
    "rename": (MANAGE, _rename),
    "drop": (MANAGE, _drop),
    "write": (WRITE, _publish),
    "tag": (WRITE, _tag),
    "untag": (WRITE, _untag),
    "expire": (MANAGE, _expire),
    "annotate": (WRITE, _annotate),
    "lineage": (WRITE, _lineage),
    "label": (WRITE, _label),
    "unlabel": (WRITE, _unlabel),
}


def may(server: Server, request: Request, action: str, privilege: str, name: str) -> tuple[str, list[Grant]]:
    """The principal and its grants when it holds ``privilege`` on ``name``; else the one 403 (audited), the same
    whether or not the dataset exists."""
    who, grants = server.principal(request, action, name[:200])
    if not holds(grants, privilege, name):
        server.store.record(who, action, DENIED, dataset=name[:200], client=server.client(request),
                            detail=f"no {privilege}")  # fmt: skip
        raise _refused(403, NotAuthorized(f"{who} may not {action} {name[:200]!r}: it needs {privilege} on it"))
    return who, grants


def change(action: str) -> Callable[[Server, Request, bytes], Response]:
    """The endpoint of one change (``CHANGES``)."""
    privilege, do = CHANGES[action]

    def endpoint(server: Server, request: Request, body: bytes) -> Response:

        name = str(request.path_params["name"])
        who, grants = may(server, request, action, privilege, name)
        data = _body(body)
        if action == "untag":
            data = {"tag": str(request.path_params["tag"])}  # the path is decoded already
        client = server.client(request)
        if action == "rename":
            new = str(data.get("new_name", ""))
            may(server, request, action, privilege, new)  # MANAGE on the new name too
        try:
            answer, version = do(server, who, name, data)
        except DatasetNotFound:
            server.store.record(who, action, FAILED, dataset=name, client=client, detail="no such dataset")
            return server.not_found(name, grants)
        except CatalogError as e:
            server.store.record(who, action, FAILED, dataset=name, client=client, detail=str(e)[:300])
            raise
        server.store.record(who, action, ALLOWED, dataset=name, version=version, client=client,
                            detail=f"to {data.get('new_name')}" if action == "rename" else "")  # fmt: skip
        return JSONResponse(visible(answer, grants), status_code=201 if action in ("create", "write") else 200)

    return endpoint


def catalog(server: Server, request: Request, body: bytes) -> Response:
    """The served catalog's identity (any valid token): a location's claim names it."""
    server.principal(request, "catalog")
    return JSONResponse({"catalog_id": server.cat.catalog_id})


def writable(server: Server, request: Request, body: bytes) -> Response:
    """Whether the principal may write ``?dataset=`` and the server's role can record (before any data is
    written)."""
    name = request.query_params.get("dataset")
    manage = request.query_params.get("manage") == "1"
    if name is not None:
        may(server, request, "manage" if manage else "write", MANAGE if manage else WRITE, name)
    else:
        server.principal(request, "write")
    server.cat.check_writable()
    return JSONResponse({"writable": True})


def partitions(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "partitions")
    q = request.query_params
    try:
        found = server.cat.partitions(name, version_ref(q.get("version"), q.get("time")))
    except DatasetNotFound:
        return server.not_found(name, grants)
    return JSONResponse({"partitions": [partition_json(p) for p in found]})


def diff(server: Server, request: Request, body: bytes) -> Response:
    _who, name, grants = server.readable(request, "diff")
    q = request.query_params
    old, new = (
        version_ref(q.get("old_version"), q.get("old_time")),
        version_ref(q.get("new_version"), q.get("new_time")),
    )
    try:
        return JSONResponse(server.cat.diff(name, old, new).to_dict())
    except DatasetNotFound:
        return server.not_found(name, grants)


def _number(text: str | None) -> int:
    if text is None or not text.isdigit() or len(text) > 18:
        raise InvalidName(f"invalid version {str(text)[:20]!r}: a version number")
    return int(text)


def lineage(server: Server, request: Request, body: bytes) -> Response:
    """``/upstream`` and ``/downstream`` of a version: only edges whose other end the principal may read."""
    down = request.url.path.endswith("/downstream")
    _who, name, grants = server.readable(request, "downstream" if down else "upstream")
    number = _number(request.query_params.get("version"))
    try:
        if down:
            limit = request.query_params.get("limit", "1000")
            edges = server.cat.downstream(name, number, limit=_number(limit))
            shown = [e for e in edges if allows(grants, READ, e.dataset)]
        else:
            edges = server.cat.upstream(name, number)
            # the name it was read under, too, only when that name is one the principal may read
            shown = [e if e.recorded_as is None or allows(grants, READ, e.recorded_as) else replace(e, recorded_as=None)
                     for e in edges if allows(grants, READ, e.upstream)]  # fmt: skip
    except DatasetNotFound:
        return server.not_found(name, grants)
    return JSONResponse({"edges": [edge_json(e) for e in shown]})


def labelled(server: Server, request: Request, body: bytes) -> Response:
    """``Catalog.labelled``: the names of the datasets with ``?label=`` on themselves or a column, among those the
    principal may read (``dal ls --label``)."""
    _who, grants = server.principal(request, "search")
    names = server.cat.labelled(request.query_params.get("label", ""))
    return JSONResponse({"names": sorted(n for n in names if allows(grants, READ, n))})


def search(server: Server, request: Request, body: bytes) -> Response:
    """``Catalog.search_datasets`` among the datasets the principal may read (the page is of those), with each
    result's match reasons."""
    _who, grants = server.principal(request, "search")
    q = request.query_params
    query, sort = q.get("q") or None, q.get("sort", "name")
    limit = min(_limit(request) or 50, 1000)
    offset_text = q.get("offset", "0")
    if not offset_text.isdigit() or len(offset_text) > 9:
        raise InvalidName(f"invalid offset {offset_text[:20]!r}: a whole number")
    offset = int(offset_text)
    filters = {k[2:]: v for k, v in q.items() if k.startswith("f.")}
    found: list[Any] = []
    page, at = 1000, 0
    while len(found) < offset + limit:  # pages of the whole catalog, keeping the readable rows
        rows = server.cat.search_datasets(query, limit=page, offset=at, filters=filters or None, sort=sort)
        found += [r for r in rows if allows(grants, READ, r[0].name)]
        if len(rows) < page:
            break
        at += page
    shown = found[offset : offset + limit]
    reasons = server.cat.match_reasons(query, [d.name for d, _, _ in shown])
    results = [{"dataset": dataset_json(d), "rows": rows, "size": size, "reasons": [list(r) for r in reasons.get(d.name, [])]}
               for d, rows, size in shown]  # fmt: skip
    return JSONResponse({"results": results})
