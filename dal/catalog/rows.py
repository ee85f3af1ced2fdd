"""Rows <-> frozen values, and version references read once: the one implementation ``Catalog``
(``dal.catalog.base``, over SQLAlchemy) and ``LiteCatalog`` (``dal.catalog.lite``, over the plain DB-API) share.

It imports no SQLAlchemy: the lite reader's processes never load it (tests/reader/test_open_without_sqlalchemy.py).
A row is a sequence of column values in the order of ``DATASET_COLUMNS`` / ``VERSION_COLUMNS`` / ``FIELD_COLUMNS``:
a DB-API tuple as it comes (times as text on SQLite, JSON as text), or the same columns read from an ORM row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dal.catalog.types import MAX_VERSION, TAG_TEXT, DatasetInfo, Field, Schema, VersionInfo, version_ref

DATASET_COLUMNS = (
    "id", "name", "format", "location", "description", "owner", "time_column", "created_at", "updated_at",
    "current_version", "properties",
)  # fmt: skip
VERSION_COLUMNS = (
    "id", "number", "created_at", "operation", "row_count", "file_count", "size_bytes", "storage_version", "schema_id",
    "partition_columns", "properties",
)  # fmt: skip
FIELD_COLUMNS = ("name", "type", "nullable", "dtype", "shape", "codec")
# a version's column descriptions (column -> text), kept in its properties: schemas are shared between versions by
# their fields' definitions, and an older catalog's rows need no new column (no migration)
COLUMN_DESCRIPTIONS = "column_descriptions"


def like_pattern(pattern: str) -> str:
    """Translate a shell glob (``*``, ``?``) into a LIKE pattern with ``\\`` as the escape character."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def utc(value: Any) -> datetime:
    """A stored time as an aware UTC datetime (SQLite hands text, PostgreSQL and the ORM datetimes)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def from_json(value: Any) -> Any:
    """A JSON column's value (text from the DB-API, already decoded from the ORM)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def columns(row: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """The values of ``names`` of an ORM object or a named row, in that order."""
    return tuple(getattr(row, n) for n in names)


def dataset_info(r: Sequence[Any]) -> DatasetInfo:
    """A dataset from a row of ``DATASET_COLUMNS``."""
    return DatasetInfo(
        name=r[1],
        format=r[2],
        location=r[3],
        description=r[4],
        owner=r[5],
        time_column=r[6],
        created_at=utc(r[7]),
        updated_at=utc(r[8]),
        latest_version=None if r[9] < 0 else int(r[9]),
        properties=dict(from_json(r[10]) or {}),
    )


def schema(rows: Iterable[Sequence[Any]]) -> Schema:
    """A schema from its field rows of ``FIELD_COLUMNS``, in position order."""
    return Schema(
        tuple(
            Field(
                name=n,
                type=t,
                nullable=bool(nullable),
                dtype=dtype,
                shape=None if (shape := from_json(raw_shape)) is None else tuple(shape),
                codec=codec,
            )
            for n, t, nullable, dtype, raw_shape, codec in rows
        )
    )


def version_info(name: str, r: Sequence[Any], schema: Schema, tags: Iterable[str]) -> VersionInfo:
    """A version of dataset ``name`` from a row of ``VERSION_COLUMNS``, with its schema and its tags (sorted); the
    column descriptions the version's properties keep (``COLUMN_DESCRIPTIONS``) go on its schema's fields."""
    properties = dict(from_json(r[10]) or {})
    descriptions = properties.pop(COLUMN_DESCRIPTIONS, None)
    if isinstance(descriptions, dict) and descriptions:
        schema = schema.described(descriptions)
    return VersionInfo(
        dataset=name,
        number=r[1],
        created_at=utc(r[2]),
        operation=r[3],
        row_count=r[4],
        file_count=r[5],
        size_bytes=r[6],
        storage_version=r[7],
        schema=schema,
        partition_columns=tuple(from_json(r[9]) or ()),
        tags=tuple(tags),
        properties=properties,
    )


@dataclass(frozen=True)
class Reference:
    """A version reference as the catalog looks it up, in this order: the newest (``latest``); a version number
    (``number``; ``out_of_range`` when no version can have it); a tag (``tag``: text a tag can be, never junk sent
    to the database); a time (``time``, as given: naive is UTC; text is read as one only when asked). ``text``: the
    string given, for messages; text that is neither a tag that exists nor a time is no version."""

    latest: bool = False
    number: int | None = None
    out_of_range: bool = False
    tag: str | None = None
    when: datetime | None = None
    text: str | None = None

    @property
    def time(self) -> datetime | None:
        if self.when is not None or self.text is None:
            return self.when
        try:
            return datetime.fromisoformat(self.text)
        except ValueError:
            return None


def reference(ref: object) -> Reference:
    """Read a version reference once (``dal.catalog.types.version_ref`` first).

    Raises:
        InvalidName: not a version reference. TypeError: a type ``version_ref`` passes but no reference has.
    """
    ref = version_ref(ref)
    if ref is None or ref == "latest":
        return Reference(latest=True)
    if isinstance(ref, int):
        return Reference(number=ref, out_of_range=not 0 <= ref <= MAX_VERSION)
    if isinstance(ref, datetime):
        return Reference(when=ref)
    if isinstance(ref, str):
        return Reference(tag=ref if TAG_TEXT.fullmatch(ref) else None, text=ref)
    raise TypeError(f"version must be an int, a tag, a datetime or None, not {type(ref).__name__}")
