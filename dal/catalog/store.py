"""The catalog API: datasets, numbered immutable versions, schemas, partitions and tags.

Every method opens its own short transaction and returns frozen values from ``dal.catalog.types``.
Backend errors are translated at this boundary into ``dal.catalog.errors``.
"""

from __future__ import annotations

import getpass
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from dal.catalog.base import (
    EXPIRED_AT,
    FILES_DELETED,
    FORMAT_NAME,
    UNAVAILABLE,
    CatalogBase,
    check_properties,
    like_pattern,
)
from dal.catalog.edges import LineageEdges
from dal.catalog.errors import (
    CatalogError,
    DatasetExists,
    TagExists,
    VersionNotFound,
)
from dal.catalog.models import (
    DatasetRow,
    LineageRow,
    PartitionRow,
    SchemaRow,
    TagRow,
    VersionRow,
    utcnow,
)
from dal.catalog.publishing import VersionPublishing, with_descriptions
from dal.catalog.search import CatalogSearch
from dal.catalog.types import (
    DatasetInfo,
    Partition,
    Schema,
    SchemaDiff,
    VersionDraft,
    VersionInfo,
    VersionRef,
    diff_schemas,
    validate_column,
    validate_name,
    validate_tag,
    validate_text,
)

__all__ = ["EXPIRED_AT", "FILES_DELETED", "UNAVAILABLE", "Catalog", "CatalogBase", "VersionRef", "with_descriptions"]


class Catalog(LineageEdges, CatalogSearch, VersionPublishing):
    """A handle on one catalog database (SQLite file or PostgreSQL): datasets, numbered versions, schemas,
    partitions, tags and lineage edges.

    Args:
        url: any SQLAlchemy URL; default ``$DAL_CATALOG_URL`` or the embedded SQLite file.
        create: create the catalog tables when the database is empty (first use).
        must_exist: for read-only use: an SQLite catalog file that does not exist is a
            ``CatalogUnavailable`` (saying how to create one); neither the file nor its folder is created.
        pooled: PostgreSQL: keep a few connections open between operations, for a long-running server (``dal ui``);
            by default each operation connects and closes (``dal.catalog.engine``: no process holds idle connections).

    Raises:
        CatalogUnavailable: the database cannot be reached (or, ``must_exist``, the SQLite file is missing).
        CatalogOutOfDate: the database needs ``dal db upgrade``.
    """

    # -- datasets -----------------------------------------------------------------------------

    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Datasets sorted by name; ``pattern`` is a glob on the name (``weather.*``) or, without
        wildcards, a case-insensitive substring of the name or description. ``limit``: the first ``limit``."""
        validate_text(pattern, "pattern", optional=True, max_length=1000)
        stmt = select(DatasetRow).order_by(DatasetRow.name)
        if limit is not None:
            stmt = stmt.limit(max(0, int(limit)))
        if pattern:
            if any(c in pattern for c in "*?"):
                stmt = stmt.where(DatasetRow.name.like(like_pattern(pattern), escape="\\"))
            else:
                needle = f"%{like_pattern(pattern.lower())}%"
                stmt = stmt.where(
                    or_(
                        func.lower(DatasetRow.name).like(needle, escape="\\"),
                        func.lower(DatasetRow.description).like(needle, escape="\\"),
                    )
                )
        with self._read() as s:
            return [self._dataset_info(r) for r in s.scalars(stmt)]

    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]:
        """Row count and size in bytes of the latest version of each dataset ``list_datasets`` lists (those with a
        version), in one query (``dal ls --json``)."""
        validate_text(pattern, "pattern", optional=True, max_length=1000)
        ids = select(DatasetRow.id).order_by(DatasetRow.name)
        clause = self._search_clause(pattern)
        if clause is not None:
            ids = ids.where(clause)
        if limit is not None:
            ids = ids.limit(max(0, int(limit)))
        page = ids.subquery()
        latest = (VersionRow.dataset_id == DatasetRow.id) & (VersionRow.number == DatasetRow.current_version)
        stmt = (
            select(DatasetRow.name, VersionRow.row_count, VersionRow.size_bytes)
            .join(page, page.c.id == DatasetRow.id)
            .join(VersionRow, latest)
        )
        with self._read() as s:
            return {str(n): (int(r), int(b)) for n, r, b in s.execute(stmt)}

    def get_dataset(self, name: str) -> DatasetInfo:
        """The dataset called ``name``. Raises ``DatasetNotFound`` (with close names) or ``InvalidName``."""
        with self._read() as s:
            return self._dataset_info(self._dataset_row(s, name))

    def create_dataset(
        self,
        name: str,
        *,
        format: str,
        location: str,
        description: str = "",
        owner: str | None = None,
        time_column: str | None = None,
        properties: Mapping[str, Any] | None = None,
        exist_ok: bool = False,
        unique_location: bool = False,
    ) -> DatasetInfo:
        """Record a new dataset (no versions yet).

        With ``exist_ok`` an existing dataset of the same format and location is returned as is. With
        ``unique_location`` a location another dataset has is refused (a write adopting the table at its
        default location must not take over a renamed dataset's table, which still names its first writer).

        Raises:
            InvalidName: bad name. DatasetExists: the name is taken (or taken with other settings).
        """
        validate_name(name)
        validate_text(location, "location", max_length=10_000)
        validate_text(description, "description")
        validate_text(owner, "owner", optional=True, max_length=1000)
        validate_column(time_column)
        if not isinstance(format, str) or not FORMAT_NAME.fullmatch(format):
            raise CatalogError(f"unknown format {format!r}: a format is named by a short lower-case word")
        row = DatasetRow(
            name=name,
            format=format,
            location=location,
            description=description,
            owner=owner if owner is not None else getpass.getuser(),
            time_column=time_column,
            properties=dict(properties or {}),
            current_version=-1,
        )
        try:
            with self._write() as s:
                # two catalog entries over one table would record its commits twice (e.g. a write to the
                # old name of a renamed dataset adopting the table that still carries that name)
                other = (
                    s.scalar(select(DatasetRow.name).where(DatasetRow.location == location, DatasetRow.name != name))
                    if unique_location
                    else None
                )
                if other is not None:
                    raise DatasetExists(
                        f"{location} is the location of dataset {other!r} already; not creating {name!r}"
                    )
                s.add(row)
                s.flush()
                return self._dataset_info(row)
        except IntegrityError as e:
            existing = self.get_dataset(name)
            if exist_ok and (existing.format, existing.location) == (format, location):
                return existing
            raise DatasetExists(f"dataset {name!r} exists already ({existing.format} at {existing.location})") from e

    def update_dataset(
        self,
        name: str,
        *,
        description: str | None = None,
        time_column: str | None = None,
        owner: str | None = None,
        properties: Mapping[str, Any] | None = None,
        clear_time_column: bool = False,
    ) -> DatasetInfo:
        """Change a dataset's description, time column, owner or properties (its versions are untouched).

        ``properties`` are merged into the dataset's: a key set to ``None`` is removed. ``clear_time_column``:
        the dataset has no time column any more (its newest schema lost it).
        """
        validate_text(description, "description", optional=True)
        validate_column(time_column)
        validate_text(owner, "owner", optional=True, max_length=200)
        props = check_properties(properties)
        with self._write() as s:
            row = self._dataset_row(s, name, for_update=True)
            if description is not None:
                row.description = description
            if time_column is not None:
                row.time_column = time_column
            elif clear_time_column:
                row.time_column = None
            if owner is not None:
                row.owner = owner
            if props:
                merged = dict(row.properties or {})
                for k, v in props.items():
                    if v is None:
                        merged.pop(k, None)
                    else:
                        merged[k] = v
                row.properties = merged
            row.updated_at = utcnow()
            return self._dataset_info(row)

    def rename_dataset(self, name: str, new_name: str) -> DatasetInfo:
        """Give a dataset another name; its versions, tags and location stay as they are.

        Raises:
            DatasetNotFound; InvalidName; DatasetExists: ``new_name`` is taken.
        """
        validate_name(new_name)
        try:
            with self._write() as s:
                row = self._dataset_row(s, name, for_update=True)
                if new_name == name:
                    return self._dataset_info(row)
                now = utcnow()
                # the names it had, and until when: lineage records written before name the old one
                former = (row.properties or {}).get("former_names")
                former = [*(former if isinstance(former, list) else []), {"name": name, "until": now.isoformat()}]
                row.properties = {**(row.properties or {}), "former_names": former}
                row.name = new_name
                row.updated_at = now
                s.flush()
                return self._dataset_info(row)
        except IntegrityError as e:
            raise DatasetExists(f"cannot rename {name!r} to {new_name!r}: a dataset called {new_name!r} exists") from e

    def delete_dataset(self, name: str) -> None:
        """Remove a dataset, all its versions and tags from the catalog (the data files are not touched)."""
        with self._write() as s:
            row = self._dataset_row(s, name, for_update=True)
            ids = select(VersionRow.id).where(VersionRow.dataset_id == row.id)
            # explicit, not only ON DELETE CASCADE: a PostgreSQL or SQLite catalog created without enforced
            # foreign keys must not keep tags and versions of a dropped dataset
            s.execute(delete(TagRow).where(TagRow.dataset_id == row.id))
            s.execute(delete(PartitionRow).where(PartitionRow.version_id.in_(ids)))
            s.execute(delete(LineageRow).where(LineageRow.version_id.in_(ids)))
            # what was built from it keeps its edges, by the recorded name: the dataset is gone (and a new one
            # taking its name must not inherit them)
            s.execute(
                update(LineageRow).where(LineageRow.upstream_dataset_id == row.id).values(upstream_dataset_id=None)
            )
            s.execute(delete(VersionRow).where(VersionRow.dataset_id == row.id))
            s.execute(delete(SchemaRow).where(SchemaRow.dataset_id == row.id))
            s.delete(row)

    def expire_versions(self, name: str, numbers: Sequence[int], reason: str) -> list[VersionInfo]:
        """Mark versions as expired (their data was or is being deleted): they stay in the history, and
        opening one says ``reason``. Versions already unavailable are left as they are; returns those marked."""
        validate_text(reason, "reason", max_length=2000)
        out = []
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            rows = s.scalars(
                select(VersionRow)
                .where(VersionRow.dataset_id == ds.id, VersionRow.number.in_(list(numbers)))
                .order_by(VersionRow.number)
            ).all()
            for r in rows:
                props = dict(r.properties or {})
                if props.get(UNAVAILABLE):
                    continue
                props[UNAVAILABLE] = reason
                props[EXPIRED_AT] = utcnow().isoformat()
                r.properties = props
                out.append(r)
            s.flush()
            return [self._version_info(name, r) for r in out]

    def annotate_versions(self, name: str, numbers: Sequence[int], key: str, value: Any) -> None:
        """Set one key of several versions' properties in one transaction (gc: their files are deleted)."""
        check_properties({key: value})
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            rows = s.scalars(
                select(VersionRow).where(VersionRow.dataset_id == ds.id, VersionRow.number.in_(list(numbers)))
            ).all()
            for r in rows:
                r.properties = {**(r.properties or {}), key: value}

    def annotate_version(self, name: str, number: int, key: str, value: Any) -> VersionInfo:
        """Set one key of a version's properties (dal's lineage record); the version's data is untouched."""
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            row = s.scalar(select(VersionRow).where(VersionRow.dataset_id == ds.id, VersionRow.number == number))
            if row is None:
                raise VersionNotFound(f"{name} has no version {number}")
            row.properties = {**(row.properties or {}), key: value}
            s.flush()
            return self._version_info(name, row)

    # -- versions -----------------------------------------------------------------------------

    def publish(self, name: str, draft: VersionDraft) -> VersionInfo:
        """Record the next version of ``name``; numbers are gap-free even with concurrent publishers
        (``publish_many`` with one draft: one implementation of the rules).

        Args:
            name: the dataset.
            draft: the version.

        Raises:
            DatasetNotFound; TagExists: a requested tag is on another version;
            VersionConflict: ``draft.storage_version`` is not newer than every recorded storage version.
        """
        return self.publish_many(name, [draft])[0]

    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]:
        """The history of ``name``, oldest first; ``limit``: only the newest ``limit`` versions.

        Plain column queries (no ORM objects): the versions, their tags, and each distinct schema once — a
        history of hundreds of versions usually shares a handful of schemas."""
        v = VersionRow.__table__.c
        columns = (v.id, v.number, v.created_at, v.operation, v.row_count, v.file_count, v.size_bytes,
                   v.storage_version, v.schema_id, v.partition_columns, v.properties)  # fmt: skip
        with self._read() as s:
            ds = self._dataset_row(s, name)
            stmt = select(*columns).where(v.dataset_id == ds.id)
            if limit is None:
                rows = s.execute(stmt.order_by(v.number)).all()
            else:
                rows = s.execute(stmt.order_by(v.number.desc()).limit(max(0, int(limit)))).all()[::-1]
            tags: dict[int, list[str]] = {}
            if rows:
                ids = [r.id for r in rows]
                found = s.execute(
                    select(TagRow.version_id, TagRow.name).where(TagRow.dataset_id == ds.id).order_by(TagRow.name)
                )
                wanted = set(ids)
                for version_id, tag in found:
                    if version_id in wanted:
                        tags.setdefault(version_id, []).append(tag)
            schemas = {sid: self._schema(s.get_one(SchemaRow, sid)) for sid in dict.fromkeys(r.schema_id for r in rows)}
            return [self._version_info(name, r, schemas[r.schema_id], tags.get(r.id, ())) for r in rows]

    def version(self, name: str, ref: VersionRef = None) -> VersionInfo:
        """Resolve ``ref`` to one version of ``name``.

        ``ref`` is ``None``/``"latest"`` (the newest), a version number (an int, NumPy's too, or digits), a tag,
        or a datetime / date / ISO-8601 string (the version current at that time; naive times and dates are
        UTC, a date its midnight). A string is a tag when a tag of exactly that text exists, else read as a
        time: a tag named ``2026-04-01`` wins over the as-of reading of that string; pass a ``date`` or
        ``datetime`` to mean the time.

        Raises:
            VersionNotFound: no such number or tag, or the time is before the first version.
        """
        with self._read() as s:
            ds = self._dataset_row(s, name)
            return self._version_info(name, self._resolve(s, ds, ref))

    def schema(self, name: str, ref: VersionRef = None) -> Schema:
        """The schema of one version (default: the newest)."""
        return self.version(name, ref).schema

    def diff(self, name: str, old: VersionRef, new: VersionRef) -> SchemaDiff:
        """Fields added, removed and changed from version ``old`` to version ``new``."""
        with self._read() as s:
            ds = self._dataset_row(s, name)
            a, b = self._resolve(s, ds, old), self._resolve(s, ds, new)
            return diff_schemas(self._schema(a.schema), self._schema(b.schema), a.number, b.number)

    def partitions(self, name: str, ref: VersionRef = None) -> tuple[Partition, ...]:
        """The partitions present in one version, sorted by their path."""
        with self._read() as s:
            ds = self._dataset_row(s, name)
            v = self._resolve(s, ds, ref)
            rows = s.scalars(select(PartitionRow).where(PartitionRow.version_id == v.id).order_by(PartitionRow.key))
            return tuple(
                Partition(
                    values=tuple((str(k), None if val is None else str(val)) for k, val in r.values),
                    row_count=r.row_count,
                    file_count=r.file_count,
                    size_bytes=r.size_bytes,
                )
                for r in rows
            )

    # -- tags -----------------------------------------------------------------------------------

    def tag(self, name: str, ref: VersionRef, tag: str, *, force: bool = False) -> VersionInfo:
        """Put ``tag`` on a version. A tag names one version; moving it needs ``force=True``.

        Raises:
            TagExists: the tag is on another version and ``force`` is false.
        """
        validate_tag(tag)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            target = self._resolve(s, ds, ref)
            existing = s.scalar(select(TagRow).where(TagRow.dataset_id == ds.id, TagRow.name == tag))
            if existing is not None and existing.version_id != target.id:
                if not force:
                    held = s.get_one(VersionRow, existing.version_id).number
                    raise TagExists(f"{name}: tag {tag!r} is on version {held}; use --force to move it")
                existing.version_id = target.id
            elif existing is None:
                s.add(TagRow(dataset_id=ds.id, name=tag, version_id=target.id))
            s.flush()
            s.refresh(target, ["tags"])
            return self._version_info(name, target)

    def tags(self, name: str) -> dict[str, int]:
        """Every tag of ``name`` and the version number it names."""
        with self._read() as s:
            ds = self._dataset_row(s, name)
            rows = s.execute(
                select(TagRow.name, VersionRow.number)
                .join(VersionRow, VersionRow.id == TagRow.version_id)
                .where(TagRow.dataset_id == ds.id)
                .order_by(TagRow.name)
            )
            return {t: n for t, n in rows}

    def untag(self, name: str, tag: str) -> None:
        """Remove ``tag`` from ``name``. Raises ``VersionNotFound`` if there is no such tag."""
        validate_tag(tag)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            row = s.scalar(select(TagRow).where(TagRow.dataset_id == ds.id, TagRow.name == tag))
            if row is None:
                raise VersionNotFound(f"tag {tag!r} of {name}", tag, self._tags(s, ds.id))
            s.delete(row)
