"""The routes of ``dal serve`` that change the catalog, the beginning of a write (its storage credentials), and the
reads writers and lineage need.

Each is ``Catalog``'s method of the same name, run on the server after the grant is checked: WRITE on the dataset to
create, update, publish, tag, untag, annotate, record lineage, label and unlabel (a label describes the dataset as a
description does, which WRITE changes too); MANAGE to rename (on both names), drop and expire.
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
from dal.catalog.errors import CatalogError, DalError, DatasetNotFound, InvalidName, LocationTaken
from dal.catalog.remote import (
    dataset_json,
    draft_from,
    edge_json,
    input_from,
    partition_json,
    version_json,
)
from dal.catalog.types import DatasetInfo, labels_dict, validate_name
from dal.serve import proof
from dal.serve.common import Server, _body, _error, _limit, _Refused, holds, read_targets, verb, visible
from dal.serve.vending import CannotVend, vend, vend_write
from dal.storage import claims

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
    """``{"label": "KEY[=VALUE]", "column": null or a column}``: ``Catalog.label``; the labels afterwards."""
    text, column = str(_json(d.get("label"), "label", str)), _opt_str(d, "column")
    return {"labels": labels_dict(server.cat.label(name, text, column=column))}, None


def _unlabel(server: Server, who: str, name: str, d: dict[str, Any]) -> tuple[Any, int | None]:
    """As ``_label``, for ``Catalog.unlabel``."""
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
    validate_name(name)  # a name that cannot exist: 400 InvalidName, not a refusal of a privilege it may hold
    if not holds(grants, privilege, name):
        server.store.record(who, action, DENIED, dataset=name[:200], client=server.client(request),
                            detail=f"no {privilege}")  # fmt: skip
        raise _refused(403, NotAuthorized(f"{who} may not {verb(action)} {name[:200]!r}: it needs {privilege} on it"))
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
        except LocationTaken as e:  # the other dataset is named only to a principal that may read it
            shown = (
                e
                if e.other is not None and holds(grants, READ, e.other)
                else LocationTaken(
                    f"{data.get('location')!s:.500} overlaps the location of another dataset (the same place, inside "
                    f"it or around it); one location belongs to one dataset: not creating {name!r}"
                )
            )
            server.store.record(who, action, DENIED, dataset=name, client=client, detail="location taken")
            raise shown from None
        except CatalogError as e:
            server.store.record(who, action, FAILED, dataset=name, client=client, detail=str(e)[:300])
            raise
        detail = f"to {data.get('new_name')}" if action == "rename" else ""
        if action in ("label", "unlabel"):
            detail = f"{data.get('label')}" + (f" on column {data['column']}" if data.get("column") else "")
        server.store.record(who, action, ALLOWED, dataset=name, version=version, client=client, detail=detail[:300])
        return JSONResponse(visible(answer, grants), status_code=201 if action in ("create", "write") else 200)

    return endpoint


def begin_write(server: Server, request: Request, body: bytes) -> Response:
    """A write of ``name`` begins (``{"location": ...}``: where a new dataset will be; an existing one's is its
    own): WRITE on it, else the one 403 (audited). Answers the location and, where the server vends storage
    credentials for writes there (``dal.serve.vending.vend_write``), short-lived ones for it (audited as
    ``vended write SCOPE``, never a secret; never cached). Credentials that would reach a dataset the principal
    may not write are refused (400, audited as denied). A dataset dal never writes here (registered read-only, a
    format dal does not write) and ``{"read_only": true}`` (a read-only registration) get read credentials."""
    name = str(request.path_params["name"])
    who, grants = may(server, request, "begin write", WRITE, name)
    data, client = _body(body), server.client(request)
    read_only = bool(data.get("read_only"))
    names: tuple[str, ...] = (name,)
    try:
        info = server.cat.get_dataset(name)
        location, read_only = info.location, read_only or _never_written(info)
        names = proof.names_of(info.properties, name)
    except DatasetNotFound:
        location = str(_json(data.get("location"), "location", str))

    def others() -> list[str]:
        return server.cat.overlapping(location, besides=name)

    try:
        if read_only:
            offered = vend(server.vending, name, location)
            # a read-only registration has no claim to prove its location: nothing is handed out for it
            credentials = proof.checked(server.cat.catalog_id, names, location, offered, others)
        else:
            guarded = [
                d.location for d in server.cat.list_datasets() if d.name != name and not holds(grants, WRITE, d.name)
            ]
            offered = vend_write(server.vending, name, location, guarded)
            credentials = proof.checked(server.cat.catalog_id, names, location, offered, others, empty_ok=True)
            if offered is not None and credentials is None:
                raise CannotVend(
                    f"write credentials for {name!r} are not vended: {location} holds data that no dataset of this "
                    "catalog claims (or another dataset is there); write a new dataset to an empty location"
                )
    except CannotVend as e:
        server.store.record(who, "begin write", DENIED, dataset=name, client=client, detail=str(e)[:200])
        raise
    detail = "" if credentials is None else f"vended {credentials['access']} {credentials['scope']}"[:200]
    server.store.record(who, "begin write", ALLOWED, dataset=name, client=client, detail=detail)
    answer: dict[str, Any] = {"location": location}
    if credentials is not None:
        answer["credentials"] = credentials
    return JSONResponse(answer, headers={"Cache-Control": "no-store"})


def _never_written(info: DatasetInfo) -> bool:
    """Whether dal never writes the dataset's location for this catalog: registered read-only, or a format dal
    does not write (plain Parquet)."""
    from dal.formats.registry import get_format  # here: the server imports the formats only when a write begins

    if info.properties.get(claims.READ_ONLY) is True:
        return True
    try:
        return not get_format(info.format).writable
    except DalError:  # a format this dal does not know: never written by it
        return True


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
    # the page is one of the readable datasets, in the database (the grants' targets as a WHERE clause)
    shown = server.cat.search_datasets(query, limit=limit, offset=offset, filters=filters or None, sort=sort,
                                       within=read_targets(grants))  # fmt: skip
    shown = [r for r in shown if allows(grants, READ, r[0].name)]  # the same rule, checked once more
    reasons = server.cat.match_reasons(query, [d.name for d, _, _ in shown])
    results = [{"dataset": dataset_json(d), "rows": rows, "size": size, "reasons": [list(r) for r in reasons.get(d.name, [])]}
               for d, rows, size in shown]  # fmt: skip
    return JSONResponse({"results": results})
