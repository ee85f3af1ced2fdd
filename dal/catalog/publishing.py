"""Publishing versions: one or many numbered versions of a dataset recorded in one transaction, with bulk inserts
(a register or sync of a table with hundreds of commits records them all at once, not one transaction each)."""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, func, insert, select
from sqlalchemy.orm import Session

from dal.catalog.base import CatalogBase
from dal.catalog.errors import CatalogError, TagExists, VersionConflict
from dal.catalog.models import PartitionRow, SchemaRow, TagRow, VersionRow, utcnow
from dal.catalog.rows import COLUMN_DESCRIPTIONS, version_info
from dal.catalog.types import MAX_BIGINT, Schema, VersionDraft, VersionInfo, as_utc, validate_tag, validate_text

# the tables the bulk inserts write (Core: no per-row ORM bookkeeping, half the CPU of ORM bulk inserts)
_VERSIONS = cast(Table, VersionRow.__table__)
_PARTITIONS = cast(Table, PartitionRow.__table__)
_TAGS = cast(Table, TagRow.__table__)


def with_descriptions(properties: Mapping[str, Any], schema: Schema) -> dict[str, Any]:
    """A version's properties with its schema's column descriptions (``dal.catalog.rows.COLUMN_DESCRIPTIONS``)."""
    out = {k: v for k, v in properties.items() if k != COLUMN_DESCRIPTIONS}
    for name, text in schema.descriptions.items():
        validate_text(text, f"the description of column {name!r}")
    if schema.descriptions:
        out[COLUMN_DESCRIPTIONS] = schema.descriptions
    return out


def check_drafts(drafts: Sequence[VersionDraft]) -> None:
    """Everything a batch is refused for that needs no database, checked before any row is written.

    Raises:
        InvalidName: a bad tag. CatalogError: negative counts, partition columns not in the schema, a tag asked for
            twice, or storage versions not increasing within the batch.
    """
    tags: set[str] = set()
    storage: int | None = None
    for d in drafts:
        for t in d.tags:
            validate_tag(t)
            if t in tags:
                raise CatalogError(f"tag {t!r} is asked for on two versions of one batch")
            tags.add(t)
        counts = [d.row_count, d.file_count, d.size_bytes, 0 if d.storage_version is None else d.storage_version]
        counts += [n for p in d.partitions for n in (p.row_count, p.file_count, p.size_bytes)]
        if any(type(n) is not int and (isinstance(n, bool) or not isinstance(n, numbers.Integral)) for n in counts):
            raise CatalogError("row_count, file_count, size_bytes and storage_version must be whole numbers")
        if not all(0 <= n <= MAX_BIGINT for n in counts):
            raise CatalogError(
                f"row_count, file_count, size_bytes and storage_version must be >= 0 and <= {MAX_BIGINT}"
            )
        unknown = [c for c in d.partition_columns if c not in d.schema.names]
        if unknown:
            raise CatalogError(f"partition columns {unknown} are not in the schema")
        with_descriptions(d.properties, d.schema)  # the descriptions' texts
        if d.storage_version is not None:
            if storage is not None and d.storage_version <= storage:
                raise CatalogError(
                    f"storage versions of one batch must increase: {d.storage_version} follows {storage}"
                )
            storage = d.storage_version


_PARTITION_COLUMNS = ("version_id", "key", "values", "row_count", "file_count", "size_bytes")


def _json(values: tuple[tuple[str, str | None], ...]) -> str:
    """A partition's values as the ``values`` column stores them (what the JSON type would write)."""
    return json.dumps([list(kv) for kv in values])


def _insert_partitions(s: Session, rows: Sequence[tuple[Any, ...]]) -> None:
    """``rows`` (in ``_PARTITION_COLUMNS``' order, the values already JSON) inserted with one ``executemany`` of
    the driver: the statement compiled once for the dialect, every value a bound parameter. Through the ORM or
    Core's own ``executemany`` each row's parameters are processed one by one (~20 us a row: a fifth of a
    register of 50,000 files in 100 commits of 100 partitions)."""
    conn = s.connection()
    stmt = insert(_PARTITIONS).values({c: bindparam(c) for c in _PARTITION_COLUMNS}).inline()  # no RETURNING
    compiled = stmt.compile(dialect=conn.dialect)
    names = list(compiled.positiontup or ()) if compiled.positional else None
    if names is not None:
        at = [_PARTITION_COLUMNS.index(n) for n in names]
        params: list[Any] = [tuple(r[i] for i in at) for r in rows]
    else:
        params = [dict(zip(_PARTITION_COLUMNS, r, strict=True)) for r in rows]
    conn.exec_driver_sql(str(compiled), params)


class VersionPublishing(CatalogBase):
    """Recording new versions (part of ``Catalog``): ``publish_many``, which ``Catalog.publish`` calls with one
    draft, so every rule is kept in one place."""

    def publish_many(
        self, name: str, drafts: Sequence[VersionDraft], *, skip_recorded: bool = False
    ) -> list[VersionInfo]:
        """Record ``drafts`` as the next versions of ``name``, in order, in ONE transaction: all of them or, when
        any is refused or the database fails, none (a re-run records them). Numbers are gap-free even with
        concurrent publishers (the dataset's row is locked: PostgreSQL ``FOR UPDATE``, SQLite ``BEGIN
        IMMEDIATE``); the versions, their partitions and tags are bulk inserts.

        Args:
            name: the dataset.
            drafts: the versions, oldest first; their storage versions (where set) increase.
            skip_recorded: drafts whose storage version is not after the newest recorded one (another process
                recorded them first) are left out instead of refusing the batch; the others are recorded.

        Returns:
            The versions recorded, oldest first.

        Raises:
            DatasetNotFound: no such dataset. TagExists: a requested tag is on another version.
            VersionConflict: (without ``skip_recorded``) the first draft's storage version is not newer than every
                recorded storage version. CatalogError, InvalidName: a draft is invalid (``check_drafts``).
        """
        drafts = list(drafts)
        check_drafts(drafts)
        if not drafts:
            return []
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            stored = [d.storage_version for d in drafts if d.storage_version is not None]
            if stored:
                # catalog versions follow storage versions in order: a duplicate or an older one is refused
                newest = s.scalar(select(func.max(VersionRow.storage_version)).where(VersionRow.dataset_id == ds.id))
                if newest is not None and stored[0] <= newest:
                    if not skip_recorded:
                        raise VersionConflict(
                            f"{name}: storage version {stored[0]} is not after the newest recorded "
                            f"storage version {newest}"
                        )
                    drafts = [d for d in drafts if d.storage_version is None or d.storage_version > newest]
                    if not drafts:
                        return []
            wanted = [t for d in drafts for t in d.tags]
            taken = s.scalars(select(TagRow.name).where(TagRow.dataset_id == ds.id, TagRow.name.in_(wanted))).all()
            if taken:
                raise TagExists(
                    f"{name}: tag(s) {', '.join(sorted(taken))} exist already; move them with dal tag --force"
                )
            fps = [d.schema.fingerprint() for d in drafts]
            schemas: dict[str, SchemaRow] = {}  # each distinct schema looked up (or added) once
            for fp, d in zip(fps, drafts, strict=True):
                if fp not in schemas:
                    schemas[fp] = self._schema_row(s, ds.id, d.schema)
            s.flush()  # the new schemas' ids
            stored_schema = {fp: self._schema(row) for fp, row in schemas.items()}
            now = utcnow()
            first = ds.current_version + 1
            values = [
                {
                    "dataset_id": ds.id,
                    "number": first + i,
                    "created_at": as_utc(d.committed_at) if d.committed_at else now,
                    "recorded_at": now,
                    "operation": d.operation,
                    "row_count": d.row_count,
                    "file_count": d.file_count,
                    "size_bytes": d.size_bytes,
                    "storage_version": d.storage_version,
                    "schema_id": schemas[fps[i]].id,
                    "partition_columns": list(d.partition_columns),
                    "properties": with_descriptions(d.properties, d.schema),
                }
                for i, d in enumerate(drafts)
            ]
            ids = s.scalars(insert(_VERSIONS).returning(_VERSIONS.c.id, sort_by_parameter_order=True), values).all()
            # a partition's key and its values' JSON, made once per batch (a register of 100 commits of 100
            # partitions writes 10,000 rows of 100 distinct values)
            spelled: dict[tuple[tuple[str, str | None], ...], tuple[str, str]] = {}
            parts = [
                (vid, *(spelled.get(p.values) or spelled.setdefault(p.values, (p.key, _json(p.values)))),
                 p.row_count, p.file_count, p.size_bytes)
                for vid, d in zip(ids, drafts, strict=True)
                for p in d.partitions
            ]  # fmt: skip
            if parts:
                _insert_partitions(s, parts)
            tags = [
                {"dataset_id": ds.id, "name": t, "version_id": vid, "created_at": now}
                for vid, d in zip(ids, drafts, strict=True)
                for t in d.tags
            ]
            if tags:
                s.execute(insert(_TAGS), tags)
            ds.current_version = first + len(drafts) - 1
            ds.updated_at = now
            columns = [
                (vid, v["number"], v["created_at"], v["operation"], v["row_count"], v["file_count"], v["size_bytes"],
                 v["storage_version"], v["schema_id"], v["partition_columns"], v["properties"])
                for vid, v in zip(ids, values, strict=True)
            ]  # fmt: skip
            return [
                version_info(name, c, stored_schema[fp], d.tags) for c, fp, d in zip(columns, fps, drafts, strict=True)
            ]
