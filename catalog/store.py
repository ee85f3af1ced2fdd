"""The catalog API: datasets, numbered immutable versions, schemas, partitions and tags.

Every method opens its own short transaction and returns frozen values from ``catalog.types``.
Backend errors are translated at this boundary into ``catalog.errors``.
"""

from __future__ import annotations

import getpass
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any

from sqlalchemy import Text, cast, delete, func, or_, select, text, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from catalog import migrate
from catalog.engine import default_url, display_url, make_engine
from catalog.errors import (
    CatalogError,
    CatalogReadOnly,
    CatalogUnavailable,
    DatasetExists,
    DatasetNotFound,
    TagExists,
    VersionConflict,
    VersionNotFound,
)
from catalog.models import (
    DatasetRow,
    LineageRow,
    PartitionRow,
    SchemaFieldRow,
    SchemaRow,
    TagRow,
    VersionRow,
    utcnow,
)
from catalog.types import (
    HOW,
    MAX_VERSION,
    DatasetInfo,
    Edge,
    Field,
    Input,
    Partition,
    Schema,
    SchemaDiff,
    VersionDraft,
    VersionInfo,
    as_utc,
    diff_schemas,
    validate_column,
    validate_name,
    validate_tag,
    validate_text,
    version_ref,
)

VersionRef = int | str | datetime | date | None  # a date: its midnight UTC
_TAG_TEXT = re.compile(r"[A-Za-z0-9_.-]{1,100}")
# a format is dal's business (dal.formats): the catalog stores its name, a short lower-case word
_FORMAT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
# version properties: why a version cannot be read any more (expired by gc, vacuumed, log expired), and when
# dal gc expired it
UNAVAILABLE = "unavailable"
EXPIRED_AT = "expired_at"
FILES_DELETED = "files_deleted_at"  # set by dal gc once the expired version's files are deleted
MAX_PROPERTIES = 100
# what recording writes needs on PostgreSQL: rows in every table; updates of datasets (the row lock that
# serialises publishers) and tags (moving one)
_WRITE_PRIVILEGES = (
    ("dal_datasets", "INSERT"),
    ("dal_datasets", "UPDATE"),
    ("dal_schemas", "INSERT"),
    ("dal_schema_fields", "INSERT"),
    ("dal_versions", "INSERT"),
    ("dal_partitions", "INSERT"),
    ("dal_tags", "INSERT"),
    ("dal_tags", "UPDATE"),
)


def _is_permission_error(e: DBAPIError) -> bool:
    """A backend's "you may not write": PostgreSQL's insufficient_privilege (42501), SQLite's read-only
    database (a read-only file, medium or ``mode=ro`` connection)."""
    orig = e.orig
    if getattr(orig, "sqlstate", None) == "42501":
        return True
    name = str(getattr(orig, "sqlite_errorname", ""))
    return name.startswith("SQLITE_READONLY") or "attempt to write a readonly database" in str(orig)


def _like_pattern(pattern: str) -> str:
    """Translate a shell glob (``*``, ``?``) into a LIKE pattern with ``\\`` as the escape character."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _check_properties(properties: Mapping[str, Any] | None) -> dict[str, Any]:
    """User properties of a dataset: string keys, JSON scalar values (None removes a key)."""
    if properties is None:
        return {}
    if not isinstance(properties, Mapping):
        raise CatalogError(f"properties must be a mapping of names to values, not {type(properties).__name__}")
    if len(properties) > MAX_PROPERTIES:
        raise CatalogError(f"at most {MAX_PROPERTIES} properties at once")
    out: dict[str, Any] = {}
    for k, v in properties.items():
        key = validate_text(k, "property name", max_length=200)
        if not key or not _TAG_TEXT.fullmatch(key):
            raise CatalogError(f"property name {k!r} must be 1-100 letters, digits, '_', '.' or '-'")
        if isinstance(v, float) and not math.isfinite(v):
            raise CatalogError(f"property {key!r} must be a finite number, not {v}")
        if v is not None and not isinstance(v, str | int | float | bool):
            raise CatalogError(f"property {key!r} must be a string, number or bool, not {type(v).__name__}")
        if isinstance(v, str):
            validate_text(v, f"property {key!r}")
        out[key] = v
    return out


class Catalog:
    """A handle on one catalog database (SQLite file or PostgreSQL).

    Args:
        url: any SQLAlchemy URL; default ``$DAL_CATALOG_URL`` or the embedded SQLite file.
        create: create the catalog tables when the database is empty (first use).

    Raises:
        CatalogUnavailable: the database cannot be reached.
        CatalogOutOfDate: the database needs ``dal db upgrade``.
    """

    def __init__(self, url: str | None = None, *, create: bool = True) -> None:
        self.url = url or default_url()
        self._engine = make_engine(self.url)
        self._write_engine = self._engine.execution_options(dal_write=True)
        if create:
            with self._translate():
                migrate.ensure_current(self._engine)

    def __repr__(self) -> str:
        return f"Catalog({display_url(self.url)!r})"

    def close(self) -> None:
        self._engine.dispose()

    # -- plumbing -----------------------------------------------------------------------------

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except CatalogError:
            raise
        except (OperationalError, DBAPIError) as e:
            if isinstance(e, IntegrityError):
                raise
            first = str(e.orig).strip().splitlines()[0] if e.orig is not None else str(e)
            if isinstance(e, DBAPIError) and _is_permission_error(e):
                raise CatalogReadOnly(
                    f"this catalog role cannot write to {display_url(self.url)} ({first}); "
                    "it can read datasets but not record versions, datasets or tags"
                ) from e
            raise CatalogUnavailable(f"catalog {display_url(self.url)} failed: {first}") from e

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with self._translate(), Session(self._engine) as s:
            yield s

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._translate(), Session(self._write_engine) as s, s.begin():
            yield s

    def check_writable(self) -> None:
        """Refuse early, before any data is written to storage, when this role cannot record versions.

        PostgreSQL: the privileges recording needs (``has_table_privilege`` / ``has_sequence_privilege``
        of the current user). SQLite: a write transaction that changes nothing (a read-only file,
        medium or ``mode=ro`` connection refuses it).

        Raises:
            CatalogReadOnly: naming what is missing. CatalogUnavailable: the database cannot be reached.
        """
        with self._translate(), self._write_engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                tables = list(dict(_WRITE_PRIVILEGES))
                checks = [f"has_table_privilege(current_user, :t{i}, :p{i})" for i in range(len(_WRITE_PRIVILEGES))]
                checks += [
                    f"coalesce(has_sequence_privilege(current_user, pg_get_serial_sequence(:s{i}, 'id'), 'USAGE'), true)"
                    for i in range(len(tables))
                ]
                params = {f"t{i}": t for i, (t, _) in enumerate(_WRITE_PRIVILEGES)}
                params |= {f"p{i}": p for i, (_, p) in enumerate(_WRITE_PRIVILEGES)}
                params |= {f"s{i}": t for i, t in enumerate(tables)}
                row = conn.execute(text(f"SELECT current_user, {', '.join(checks)}"), params).one()
                user, granted = row[0], list(row[1:])
                needed = [f"{p} on {t}" for t, p in _WRITE_PRIVILEGES] + [f"USAGE on {t}_id_seq" for t in tables]
                missing = [what for what, ok in zip(needed, granted, strict=True) if not ok]
                if missing:
                    raise CatalogReadOnly(
                        f"this catalog role ({user}) cannot write to {display_url(self.url)}: it lacks "
                        + ", ".join(missing)
                        + "; nothing was written (ask for those grants, or write with another role)"
                    )
            else:
                with conn.begin() as tx:  # BEGIN IMMEDIATE: takes the write lock, as recording would
                    conn.execute(text("UPDATE dal_datasets SET name = name WHERE 1 = 0"))
                    tx.rollback()

    def revision(self) -> str | None:
        """The catalog schema revision recorded in the database (``None`` when never migrated)."""
        with self._translate(), self._engine.connect() as conn:
            return migrate.current_revision(conn)

    def upgrade(self) -> tuple[str | None, str]:
        """Upgrade the catalog schema to this dal's head revision; return (before, after)."""
        with self._translate():
            return migrate.upgrade(self._engine)

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
                stmt = stmt.where(DatasetRow.name.like(_like_pattern(pattern), escape="\\"))
            else:
                needle = f"%{_like_pattern(pattern.lower())}%"
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
        if not isinstance(format, str) or not _FORMAT_NAME.fullmatch(format):
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
        props = _check_properties(properties)
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
        _check_properties({key: value})
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

    # -- lineage edges ----------------------------------------------------------------------------

    def record_lineage(
        self, name: str, number: int, key: str, record: Mapping[str, Any], inputs: Sequence[Input]
    ) -> VersionInfo:
        """Store the lineage of one version in one transaction: ``record`` under ``key`` of its properties and an
        edge per input (repeats of a dataset, version and filter once). Each input's name is resolved to the
        dataset that held it when it was read (``Input.at``; renames are followed), or to none (dropped since).
        Recording again replaces the version's edges.

        Raises:
            VersionNotFound; CatalogError: an input with an unknown ``how`` or a bad version number.
        """
        for i in inputs:
            if i.how not in HOW:
                raise CatalogError(f"lineage input how must be one of {', '.join(HOW)}, not {i.how!r}")
            if isinstance(i.version, bool) or not isinstance(i.version, int) or not 0 <= i.version <= MAX_VERSION:
                raise CatalogError(f"lineage input version must be a version number, not {i.version!r}")
            validate_name(i.dataset)
        with self._write() as s:
            ds = self._dataset_row(s, name, for_update=True)
            row = s.scalar(select(VersionRow).where(VersionRow.dataset_id == ds.id, VersionRow.number == number))
            if row is None:
                raise VersionNotFound(f"{name} has no version {number}")
            row.properties = {**(row.properties or {}), key: dict(record)}
            s.execute(delete(LineageRow).where(LineageRow.version_id == row.id))
            seen: set[tuple[str, int, str | None]] = set()
            holders: dict[tuple[str, datetime | None], int | None] = {}
            now = utcnow()
            for i in inputs:
                if (i.dataset, i.version, i.filters) in seen:
                    continue
                seen.add((i.dataset, i.version, i.filters))
                when = as_utc(i.at) if i.at is not None else now
                if (i.dataset, when) not in holders:
                    holders[(i.dataset, when)] = self._holder(s, i.dataset, when)
                s.add(
                    LineageRow(
                        version_id=row.id,
                        upstream_dataset_id=holders[(i.dataset, when)],
                        upstream_name=i.dataset,
                        upstream_version=i.version,
                        filters=i.filters,
                        how=i.how,
                    )
                )
            s.flush()
            return self._version_info(name, row)

    @staticmethod
    def _holder(s: Session, name: str, when: datetime) -> int | None:
        """The id of the dataset called ``name`` at ``when``: one that has given that name up since (recorded by
        ``rename_dataset`` in ``former_names``) owned it until then; the dataset called so now owns it from the
        time it took it. None when no dataset held it then (dropped)."""
        mentions = "%" + _like_pattern(f'"{name}"') + "%"  # names hold no LIKE or JSON metacharacters but '_'
        rows = s.execute(
            select(DatasetRow.id, DatasetRow.name, DatasetRow.properties).where(
                or_(DatasetRow.name == name, cast(DatasetRow.properties, Text).like(mentions, escape="\\"))
            )
        ).all()
        current: tuple[int, datetime | None] | None = None
        for ds_id, ds_name, props in rows:
            start: datetime | None = None
            former = (props or {}).get("former_names")
            for f in former if isinstance(former, list) else []:
                try:
                    old, until = f["name"], as_utc(datetime.fromisoformat(f["until"]))
                except (TypeError, KeyError, ValueError):
                    continue  # not written by rename (a hand-edited property): ignore
                if old == name and (start is None or when >= start) and when < until:
                    return int(ds_id)
                start = until
            if ds_name == name:
                current = (int(ds_id), start)
        if current is not None and (current[1] is None or when >= current[1]):
            return current[0]
        return None

    def upstream(self, name: str, number: int) -> list[Edge]:
        """The recorded inputs of version ``number`` of ``name``, in the order recorded; each names the
        dataset by its current name (``recorded_as``: the name it was read under, when different)."""
        with self._read() as s:
            ds = self._dataset_row(s, name)
            vid = s.scalar(select(VersionRow.id).where(VersionRow.dataset_id == ds.id, VersionRow.number == number))
            if vid is None:
                raise VersionNotFound(f"{name} has no version {number}")
            rows = s.execute(
                select(LineageRow, DatasetRow.name)
                .outerjoin(DatasetRow, DatasetRow.id == LineageRow.upstream_dataset_id)
                .where(LineageRow.version_id == vid)
                .order_by(LineageRow.id)
            ).all()
            return [
                Edge(
                    dataset=name,
                    version=number,
                    upstream=current or r.upstream_name,
                    upstream_version=r.upstream_version,
                    filters=r.filters,
                    how=r.how,
                    recorded_as=r.upstream_name if current is not None and current != r.upstream_name else None,
                    upstream_id=r.upstream_dataset_id,
                )
                for r, current in rows
            ]

    def downstream(self, name: str, number: int, *, limit: int = 1000) -> list[Edge]:
        """The edges from version ``number`` of ``name`` to the versions built from it (by dataset name and
        version), at most ``limit`` (an indexed lookup: the dataset id and version number)."""
        limit = max(0, min(int(limit), 100_000))
        with self._read() as s:
            ds = self._dataset_row(s, name)
            rows = s.execute(
                select(DatasetRow.name, VersionRow.number, LineageRow)
                .join(VersionRow, VersionRow.id == LineageRow.version_id)
                .join(DatasetRow, DatasetRow.id == VersionRow.dataset_id)
                .where(LineageRow.upstream_dataset_id == ds.id, LineageRow.upstream_version == number)
                .order_by(DatasetRow.name, VersionRow.number, LineageRow.id)
                .limit(limit)
            ).all()
            return [
                Edge(
                    dataset=d,
                    version=n,
                    upstream=name,
                    upstream_version=number,
                    filters=r.filters,
                    how=r.how,
                    recorded_as=r.upstream_name if r.upstream_name != name else None,
                    upstream_id=ds.id,
                )
                for d, n, r in rows
            ]

    # -- versions -----------------------------------------------------------------------------

    def publish(self, name: str, draft: VersionDraft) -> VersionInfo:
        """Record the next version of ``name``; numbers are gap-free even with concurrent publishers.

        Raises:
            DatasetNotFound; TagExists: a requested tag is on another version;
            VersionConflict: ``draft.storage_version`` is not newer than every recorded storage version.
        """
        for t in draft.tags:
            validate_tag(t)
        if draft.row_count < 0 or draft.file_count < 0 or draft.size_bytes < 0:
            raise CatalogError("row_count, file_count and size_bytes must be >= 0")
        unknown = [c for c in draft.partition_columns if c not in draft.schema.names]
        if unknown:
            raise CatalogError(f"partition columns {unknown} are not in the schema")
        with self._write() as s:
            # the row lock (Postgres) / BEGIN IMMEDIATE (SQLite) serialises publishers of one dataset
            ds = self._dataset_row(s, name, for_update=True)
            if draft.storage_version is not None:
                # catalog versions follow storage versions in order: a duplicate or an older one is refused
                newest = s.scalar(select(func.max(VersionRow.storage_version)).where(VersionRow.dataset_id == ds.id))
                if newest is not None and draft.storage_version <= newest:
                    raise VersionConflict(
                        f"{name}: storage version {draft.storage_version} is not after the newest recorded "
                        f"storage version {newest}"
                    )
            taken = s.scalars(select(TagRow.name).where(TagRow.dataset_id == ds.id, TagRow.name.in_(draft.tags))).all()
            if taken:
                raise TagExists(
                    f"{name}: tag(s) {', '.join(sorted(taken))} exist already; move them with dal tag --force"
                )
            ds.current_version += 1
            ds.updated_at = utcnow()
            version = VersionRow(
                dataset_id=ds.id,
                number=ds.current_version,
                created_at=as_utc(draft.committed_at) if draft.committed_at else utcnow(),
                operation=draft.operation,
                row_count=draft.row_count,
                file_count=draft.file_count,
                size_bytes=draft.size_bytes,
                storage_version=draft.storage_version,
                schema=self._schema_row(s, ds.id, draft.schema),
                partition_columns=list(draft.partition_columns),
                properties=dict(draft.properties),
            )
            s.add(version)
            s.flush()
            s.add_all(
                PartitionRow(
                    version_id=version.id,
                    key=p.key,
                    values=[list(kv) for kv in p.values],
                    row_count=p.row_count,
                    file_count=p.file_count,
                    size_bytes=p.size_bytes,
                )
                for p in draft.partitions
            )
            s.add_all(TagRow(dataset_id=ds.id, name=t, version_id=version.id) for t in draft.tags)
            s.flush()
            s.refresh(version, ["tags"])
            return self._version_info(name, version)

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
            return [
                VersionInfo(
                    dataset=name,
                    number=r.number,
                    created_at=r.created_at,
                    operation=r.operation,
                    row_count=r.row_count,
                    file_count=r.file_count,
                    size_bytes=r.size_bytes,
                    storage_version=r.storage_version,
                    schema=schemas[r.schema_id],
                    partition_columns=tuple(r.partition_columns or ()),
                    tags=tuple(tags.get(r.id, ())),
                    properties=dict(r.properties or {}),
                )
                for r in rows
            ]

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

    # -- helpers --------------------------------------------------------------------------------

    def _dataset_row(self, s: Session, name: str, *, for_update: bool = False) -> DatasetRow:
        validate_name(name)
        stmt = select(DatasetRow).where(DatasetRow.name == name)
        if for_update:
            stmt = stmt.with_for_update()
        row = s.scalar(stmt)
        if row is None:
            raise DatasetNotFound(f"dataset {name!r}", name, s.scalars(select(DatasetRow.name)).all())
        return row

    @staticmethod
    def _tags(s: Session, dataset_id: int) -> Sequence[str]:
        return s.scalars(select(TagRow.name).where(TagRow.dataset_id == dataset_id)).all()

    def _resolve(self, s: Session, ds: DatasetRow, ref: VersionRef) -> VersionRow:
        base = select(VersionRow).where(VersionRow.dataset_id == ds.id)
        ref = version_ref(ref)  # InvalidName for a bool, float, …; ASCII digit strings become ints
        if ref is None or ref == "latest":
            row = s.scalar(base.order_by(VersionRow.number.desc()).limit(1))
            if row is None:
                raise VersionNotFound(f"any version of {ds.name!r}", hint="the dataset has no versions yet")
            return row
        if isinstance(ref, int):
            row = s.scalar(base.where(VersionRow.number == ref)) if 0 <= ref <= MAX_VERSION else None
            if row is None:
                latest = "none yet" if ds.current_version < 0 else f"0..{ds.current_version}"
                raise VersionNotFound(f"version {ref} of {ds.name!r}", hint=f"versions are {latest}")
            return row
        if isinstance(ref, str):
            text = ref
            valid = _TAG_TEXT.fullmatch(text) is not None  # never send NUL or other junk to the database
            tag = s.scalar(select(TagRow).where(TagRow.dataset_id == ds.id, TagRow.name == text)) if valid else None
            if tag is not None:
                return s.get_one(VersionRow, tag.version_id)
            try:
                ref = datetime.fromisoformat(text)
            except ValueError:
                tags = self._tags(s, ds.id)
                raise VersionNotFound(
                    f"version {text!r} of {ds.name!r}",
                    text,
                    tags,
                    hint=f"tags are {', '.join(sorted(tags))}" if tags else "it has no tags",
                ) from None
        if isinstance(ref, datetime):
            at = as_utc(ref)
            row = s.scalar(base.where(VersionRow.created_at <= at).order_by(VersionRow.number.desc()).limit(1))
            if row is None:
                first = s.scalar(base.order_by(VersionRow.number).limit(1))
                hint = f"its first version is from {first.created_at.isoformat()}" if first else "it has no versions"
                raise VersionNotFound(f"a version of {ds.name!r} as of {at.isoformat()}", hint=hint)
            return row
        raise TypeError(f"version must be an int, a tag, a datetime or None, not {type(ref).__name__}")

    @staticmethod
    def _schema_row(s: Session, dataset_id: int, schema: Schema) -> SchemaRow:
        fp = schema.fingerprint()
        row = s.scalar(select(SchemaRow).where(SchemaRow.dataset_id == dataset_id, SchemaRow.fingerprint == fp))
        if row is None:
            row = SchemaRow(
                dataset_id=dataset_id,
                fingerprint=fp,
                fields=[
                    SchemaFieldRow(
                        position=i,
                        name=f.name,
                        type=f.type,
                        nullable=f.nullable,
                        dtype=f.dtype,
                        shape=None if f.shape is None else list(f.shape),
                        codec=f.codec,
                    )
                    for i, f in enumerate(schema.fields)
                ],
            )
            s.add(row)
        return row

    @staticmethod
    def _schema(row: SchemaRow) -> Schema:
        return Schema(
            tuple(
                Field(
                    name=f.name,
                    type=f.type,
                    nullable=f.nullable,
                    dtype=f.dtype,
                    shape=None if f.shape is None else tuple(f.shape),
                    codec=f.codec,
                )
                for f in row.fields
            )
        )

    @staticmethod
    def _dataset_info(r: DatasetRow) -> DatasetInfo:
        return DatasetInfo(
            name=r.name,
            format=r.format,
            location=r.location,
            description=r.description,
            owner=r.owner,
            time_column=r.time_column,
            created_at=r.created_at,
            updated_at=r.updated_at,
            latest_version=None if r.current_version < 0 else r.current_version,
            properties=dict(r.properties or {}),
        )

    def _version_info(self, name: str, r: VersionRow) -> VersionInfo:
        return VersionInfo(
            dataset=name,
            number=r.number,
            created_at=r.created_at,
            operation=r.operation,
            row_count=r.row_count,
            file_count=r.file_count,
            size_bytes=r.size_bytes,
            storage_version=r.storage_version,
            schema=self._schema(r.schema),
            partition_columns=tuple(r.partition_columns or ()),
            tags=tuple(t.name for t in r.tags),
            properties=dict(r.properties or {}),
        )

    # -- read-only pages for the web UI (dal ui): paginated in the database -----------------------------

    @staticmethod
    def _search_clause(query: str | None) -> Any:
        """The WHERE clause of a search: a glob on the name (``weather.*``) or, without wildcards, a
        case-insensitive substring of the name or description; LIKE metacharacters are escaped, the text is
        a bound parameter."""
        if not query:
            return None
        if any(c in query for c in "*?"):
            return DatasetRow.name.like(_like_pattern(query), escape="\\")
        needle = f"%{_like_pattern(query.lower())}%"
        return or_(
            func.lower(DatasetRow.name).like(needle, escape="\\"),
            func.lower(DatasetRow.description).like(needle, escape="\\"),
        )

    @staticmethod
    def _find_clause(query: str | None, filters: Mapping[str, str] | None, skip: str | None = None) -> list[Any]:
        """The WHERE clauses of the web UI's search: ``query`` as ``_search_clause`` and, without wildcards, also
        the owner, the format, a tag or a column name of the latest version containing it; ``filters`` (facets)
        match exactly: ``format``, ``owner``, ``tag`` (a tag of any version), ``column`` (a column of the latest
        version, case-insensitive). ``skip``: a facet left out (to count that facet's values)."""
        from sqlalchemy.orm import aliased

        clauses: list[Any] = []
        # aliases: the subqueries correlate with the outer dal_datasets only (a query that also joins versions or
        # tags, as sorting by size and the tag facet do, must not make them correlate with those too)
        tag, field, version = aliased(TagRow), aliased(SchemaFieldRow), aliased(VersionRow)
        latest_fields = (
            select(field.id)
            .join(version, version.schema_id == field.schema_id)
            .where(version.dataset_id == DatasetRow.id, version.number == DatasetRow.current_version)
        )
        if query and not any(c in query for c in "*?"):
            needle = f"%{_like_pattern(query.lower())}%"
            clauses.append(
                or_(
                    func.lower(DatasetRow.name).like(needle, escape="\\"),
                    func.lower(DatasetRow.description).like(needle, escape="\\"),
                    func.lower(DatasetRow.owner).like(needle, escape="\\"),
                    func.lower(DatasetRow.format).like(needle, escape="\\"),
                    select(tag.id)
                    .where(tag.dataset_id == DatasetRow.id, func.lower(tag.name).like(needle, escape="\\"))
                    .exists(),
                    latest_fields.where(func.lower(field.name).like(needle, escape="\\")).exists(),
                )
            )
        elif query:
            clauses.append(DatasetRow.name.like(_like_pattern(query), escape="\\"))
        for key, value in (filters or {}).items():
            if not value or key == skip:
                continue
            if key == "format":
                clauses.append(DatasetRow.format == value)
            elif key == "owner":
                clauses.append(DatasetRow.owner == value)
            elif key == "tag":
                clauses.append(select(tag.id).where(tag.dataset_id == DatasetRow.id, tag.name == value).exists())
            elif key == "column":
                clauses.append(latest_fields.where(func.lower(field.name) == value.lower()).exists())
            else:
                raise CatalogError(f"unknown search facet {key!r} (format, owner, tag, column)")
        return clauses

    def count_datasets(self, query: str | None = None, filters: Mapping[str, str] | None = None) -> int:
        """How many datasets match ``query`` and ``filters`` (as ``search_datasets``)."""
        validate_text(query, "query", optional=True, max_length=1000)
        stmt = select(func.count()).select_from(DatasetRow).where(*self._find_clause(query, filters))
        with self._read() as s:
            return int(s.scalar(stmt) or 0)

    def facets(self, query: str | None = None, filters: Mapping[str, str] | None = None) -> dict[str, dict[str, int]]:
        """For the datasets a search finds, how many have each format, owner and tag (the 50 commonest of each),
        each facet counted under the other filters only (so choosing one still shows the alternatives)."""
        validate_text(query, "query", optional=True, max_length=1000)
        out: dict[str, dict[str, int]] = {}
        with self._read() as s:
            for facet, column in (("format", DatasetRow.format), ("owner", DatasetRow.owner)):
                n = func.count()
                stmt = (
                    select(column, n)
                    .where(*self._find_clause(query, filters, skip=facet), column != "")
                    .group_by(column)
                    .order_by(n.desc(), column)
                    .limit(50)
                )
                out[facet] = {str(k): int(v) for k, v in s.execute(stmt)}
            n = func.count(func.distinct(TagRow.dataset_id))
            stmt = (
                select(TagRow.name, n)
                .join(DatasetRow, DatasetRow.id == TagRow.dataset_id)
                .where(*self._find_clause(query, filters, skip="tag"))
                .group_by(TagRow.name)
                .order_by(n.desc(), TagRow.name)
                .limit(50)
            )
            out["tag"] = {str(k): int(v) for k, v in s.execute(stmt)}
        return out

    def search_datasets(
        self,
        query: str | None = None,
        *,
        limit: int = 50,
        offset: int = 0,
        filters: Mapping[str, str] | None = None,
        sort: str = "name",
    ) -> list[tuple[DatasetInfo, int | None, int | None]]:
        """One page of datasets, with the row count and size in bytes of each one's latest version (``None``
        before its first); LIMIT/OFFSET run in the database. ``query``: a glob on the name, else a substring of
        the name, description, owner, format, a tag or a column; ``filters``: exact facets (``_find_clause``);
        ``sort``: ``name``, ``updated``, ``rows`` or ``size``, descending with a leading ``-`` (ties by name)."""
        validate_text(query, "query", optional=True, max_length=1000)
        limit, offset = max(0, min(int(limit), 1000)), max(0, int(offset))
        descending = sort.startswith("-")
        key = sort.lstrip("-")
        latest = (VersionRow.dataset_id == DatasetRow.id) & (VersionRow.number == DatasetRow.current_version)
        orders = {
            "name": DatasetRow.name,
            "updated": DatasetRow.updated_at,
            "rows": VersionRow.row_count,
            "size": VersionRow.size_bytes,
        }
        if key not in orders:
            raise CatalogError(f"sort must be one of {', '.join(orders)} (a leading - for descending), not {sort!r}")
        order = orders[key].desc() if descending else orders[key].asc()
        # the page of ids first (the name index walks to the offset), then the latest versions of those rows only
        page = select(DatasetRow.id, orders[key].label("k"), DatasetRow.name.label("n"))
        if key in ("rows", "size"):
            page = page.outerjoin(VersionRow, latest)
            order = order.nulls_last()
        page = (
            page.where(*self._find_clause(query, filters)).order_by(order, DatasetRow.name).limit(limit).offset(offset)
        )
        ids = page.subquery()
        outer = ids.c.k.desc() if descending else ids.c.k.asc()
        if key in ("rows", "size"):
            outer = outer.nulls_last()
        stmt = (
            select(DatasetRow, VersionRow.row_count, VersionRow.size_bytes)
            .join(ids, ids.c.id == DatasetRow.id)
            .outerjoin(VersionRow, latest)
            .order_by(outer, ids.c.n)
        )
        with self._read() as s:
            return [(self._dataset_info(d), rows, size) for d, rows, size in s.execute(stmt)]
