"""JSON Schemas (2020-12, as OpenAPI 3.1 takes them) of what the ``dal ui`` API answers.

The catalog's values are derived from their frozen dataclasses (``dataclasses.fields`` and the type hints): a
field added to ``DatasetInfo`` or ``Field`` shows in the document without an edit here. Only how ``to_dict``
differs from the dataclass is said here (a renamed key, a key left out when None, a computed one). The envelopes
the views build around them (a listing page, a lineage record) are written out.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from dal.catalog.types import DatasetInfo, Field, FieldChange, Partition, Schema, SchemaDiff, VersionInfo

REF = "#/components/schemas/"
NULL = {"type": "null"}
STRING = {"type": "string"}
INTEGER = {"type": "integer"}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": REF + name}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, NULL]}


def of_type(hint: Any) -> dict[str, Any]:
    """The JSON Schema of a value of type ``hint`` as ``to_dict`` writes it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if origin in (types.UnionType, typing.Union):
        kinds = [of_type(a) for a in args if a is not type(None)]
        one = kinds[0] if len(kinds) == 1 else {"anyOf": kinds}
        return nullable(one) if type(None) in args else one
    if origin is tuple or origin is list:
        items = args[0] if args else Any
        return {"type": "array", "items": of_type(items)}
    if origin is Mapping or origin is dict:
        return {"type": "object", "additionalProperties": of_type(args[1]) if args else {}}
    if hint is Schema:
        return {"type": "array", "items": ref("Field")}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return ref(hint.__name__)
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if hint in simple:
        return {"type": simple[hint]}
    if hint is datetime:
        return {"type": "string", "format": "date-time"}
    raise TypeError(f"no JSON Schema for {hint!r}")  # pragma: no cover - a new field type: add it above


def of_dataclass(
    cls: type,
    *,
    rename: Mapping[str, str] | None = None,
    override: Mapping[str, dict[str, Any]] | None = None,
    omitted_when_none: tuple[str, ...] = (),
    leave_out: tuple[str, ...] = (),
    extra: Mapping[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The object ``cls.to_dict`` writes: one property per dataclass field (``rename``d; ``override`` for a key
    written otherwise than its type says; ``omitted_when_none``: absent rather than null; ``leave_out``: not
    written), and ``extra`` computed keys, all required but the omitted ones."""
    hints = typing.get_type_hints(cls)
    rename, override, extra = rename or {}, override or {}, extra or {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        if f.name in leave_out:
            continue
        key = rename.get(f.name, f.name)
        schema = override.get(key) or of_type(hints[f.name])
        if f.name in omitted_when_none:
            schema = schema["anyOf"][0] if "anyOf" in schema and NULL in schema["anyOf"] else schema
        else:
            required.append(key)
        properties[key] = schema
    properties.update(extra)
    required += list(extra)
    return {"type": "object", "properties": properties, "required": required}


def components() -> dict[str, Any]:
    """The catalog's values, as the API writes them."""
    return {
        "Field": of_dataclass(Field, omitted_when_none=("dtype", "shape", "codec", "description")),
        "FieldChange": of_dataclass(FieldChange),
        "SchemaDiff": of_dataclass(SchemaDiff),
        "Partition": of_dataclass(
            Partition,
            override={"values": {"type": "object", "additionalProperties": nullable(STRING)}},
            extra={"partition": STRING},
        ),
        "DatasetInfo": of_dataclass(DatasetInfo),
        "VersionInfo": of_dataclass(
            VersionInfo,
            rename={"number": "version"},
            omitted_when_none=("schema",),  # with_schema only (dal show's latest)
            extra={"expired": {"type": "boolean"}},
        ),
        "Error": {"type": "object", "properties": {"error": STRING}, "required": ["error"]},
    }


def _with(base: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """A catalog value with keys a view adds."""
    extra = {"type": "object", "properties": dict(properties), "required": list(properties)}
    return {"allOf": [ref(base), extra]}


def _object(properties: Mapping[str, Any], *, optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": [k for k in properties if k not in optional],
    }


_UPSTREAM = _object(
    {"dataset": STRING, "version": {}, "filters": nullable(STRING), "how": {"enum": ["declared", "inferred"]},
     "recorded_as": STRING},
    optional=("recorded_as", "filters"),
)  # fmt: skip
_DOWNSTREAM = {
    "type": "object",
    "anyOf": [
        _object({"dataset": STRING, "version": INTEGER, "how": STRING, "downstream": {"type": "array"}},
                optional=("downstream",)),
        _object({"truncated": {"const": True}, "shown": INTEGER}),
    ],
}  # fmt: skip
_COUNTS = {"type": "object", "additionalProperties": INTEGER}
_STRINGS = {"type": "array", "items": STRING}
_LABELS = _object({"dataset": _STRINGS, "columns": {"type": "object", "additionalProperties": _STRINGS}})
_MATCH = _object(
    {  # why a dataset matched ?q: its own text, or the tag or column (value) that contains it
        "in": {"enum": ["name", "description", "owner", "format", "tag", "column", "label"]},
        "value": nullable(STRING),
    }
)

RESPONSES: dict[str, dict[str, Any]] = {
    "/api": _object({
        "name": STRING, "read_only": {"type": "boolean"}, "openapi": STRING,
        "endpoints": {"type": "array", "items": _object({"path": STRING, "summary": STRING})},
    }),
    "/api/openapi.json": _object({"openapi": STRING, "info": {"type": "object"}, "paths": {"type": "object"}}),
    "/api/datasets": _object({
        "query": nullable(STRING), "filters": {"type": "object", "additionalProperties": STRING}, "sort": STRING,
        "page": INTEGER, "pages": INTEGER, "per_page": INTEGER, "total": INTEGER,
        "facets": {"type": "object", "additionalProperties": _COUNTS},
        "datasets": {"type": "array", "items": _with(
            "DatasetInfo", {"latest_row_count": nullable(INTEGER), "latest_size_bytes": nullable(INTEGER),
                            "matched": {"type": "array", "items": _MATCH}})},
    }),
    "/api/datasets/{name}": _with("DatasetInfo", {"latest": nullable(ref("VersionInfo")), "tags": _COUNTS,
                                                   "labels": _LABELS}),
    "/api/datasets/{name}/versions": {"type": "array", "items": _with(
        "VersionInfo", {"readable": nullable({"type": "boolean"}), "unreadable": nullable(STRING)})},
    "/api/datasets/{name}/schema": _object(
        {"dataset": STRING, "version": INTEGER, "fields": {"type": "array", "items": ref("Field")}}),
    "/api/datasets/{name}/diff": _with("SchemaDiff", {"row_count": _object({"old": INTEGER, "new": INTEGER})}),
    "/api/datasets/{name}/partitions": _object({
        "dataset": STRING, "version": INTEGER, "partition_columns": {"type": "array", "items": STRING},
        "partitions": {"type": "array", "items": ref("Partition")},
    }),
    "/api/datasets/{name}/tags": _object({"dataset": STRING, "tags": _COUNTS}),
    "/api/datasets/{name}/preview": _object({
        "dataset": STRING, "version": INTEGER, "columns": {"type": "array", "items": STRING},
        "rows": {"type": "array", "items": {"type": "object"}},
        "images": {"type": "array", "items": {"type": "object", "additionalProperties": STRING}},
    }),
    "/api/datasets/{name}/versions/{v}/lineage": _object({
        "dataset": STRING, "version": INTEGER, "upstream": {"type": "array", "items": _UPSTREAM},
        "downstream": {"type": "array", "items": _DOWNSTREAM},
    }),
}  # fmt: skip
