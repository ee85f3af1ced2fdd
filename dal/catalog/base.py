"""The catalog's plumbing: one database handle with short transactions, backend errors translated at this
boundary, and the rows <-> frozen values conversions every part of ``Catalog`` shares."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Row, Select, select, text
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session

from dal.catalog import migrate, rows
from dal.catalog.engine import default_url, display_url, make_engine, sqlite_file, watch_file
from dal.catalog.errors import (
    CatalogError,
    CatalogReadOnly,
    CatalogUnavailable,
    DatasetNotFound,
    VersionNotFound,
)
from dal.catalog.filewatch import file_id
from dal.catalog.models import (
    CatalogRow,
    DatasetRow,
    SchemaFieldRow,
    SchemaRow,
    TagRow,
    VersionRow,
    utcnow,
)
from dal.catalog.rows import like_pattern as like_pattern  # the catalog's queries import it from here
from dal.catalog.types import (
    MAX_VERSION,
    TAG_TEXT,
    DatasetInfo,
    Schema,
    VersionInfo,
    VersionRef,
    as_utc,
    validate_name,
    validate_text,
)

# a format is dal's business (dal.formats): the catalog stores its name, a short lower-case word
FORMAT_NAME = re.compile(r"[a-z][a-z0-9_-]{0,39}")
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


def check_properties(properties: Mapping[str, Any] | None) -> dict[str, Any]:
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
        if not key or not TAG_TEXT.fullmatch(key):
            raise CatalogError(f"property name {k!r} must be 1-100 letters, digits, '_', '.' or '-'")
        if isinstance(v, float) and not math.isfinite(v):
            raise CatalogError(f"property {key!r} must be a finite number, not {v}")
        if v is not None and not isinstance(v, str | int | float | bool):
            raise CatalogError(f"property {key!r} must be a string, number or bool, not {type(v).__name__}")
        if isinstance(v, str):
            validate_text(v, f"property {key!r}")
        out[key] = v
    return out


class CatalogBase:
    """A handle on one catalog database (SQLite file or PostgreSQL): sessions, errors, and row conversions.

    Args:
        url: any SQLAlchemy URL; default ``$DAL_CATALOG_URL`` or the embedded SQLite file.
        create: create the catalog tables when the database is empty (first use).
        must_exist: for read-only use: an SQLite catalog file that does not exist is a
            ``CatalogUnavailable`` (saying how to create one); neither the file nor its folder is created.
        pooled: PostgreSQL: keep a few connections open between operations, for a long-running server (``dal ui``);
            by default each operation connects and closes (``dal.catalog.engine``: no process holds idle connections).

    Raises:
        CatalogUnavailable: the database cannot be reached.
        CatalogOutOfDate: the database needs ``dal db upgrade``.
    """

    def __init__(
        self, url: str | None = None, *, create: bool = True, must_exist: bool = False, pooled: bool = False
    ) -> None:
        self.url = url or default_url()
        self._engine = make_engine(self.url, must_exist=must_exist, pooled=pooled)
        self._write_engine = self._engine.execution_options(dal_write=True)
        self._catalog_id: str | None = None
        self._create = create
        # an SQLite file replaced or deleted under this process is noticed at the next use (catalog.filewatch)
        file = sqlite_file(self.url)
        self._watch = None if file is None else watch_file(self._engine, file, self.url)
        if self._watch is not None:
            self._watch.opened = file_id(self._watch.path)
        if create:
            with self._translate():
                migrate.ensure_current(self._engine)
        if self._watch is not None and self._watch.opened is None:
            self._watch.opened = file_id(self._watch.path)  # the first connection created the file

    def __repr__(self) -> str:
        return f"{type(self).__name__}({display_url(self.url)!r})"

    def close(self) -> None:
        """Dispose of the engine and its pooled connections (the handle should not be used afterwards)."""
        self._engine.dispose()

    # -- plumbing -----------------------------------------------------------------------------

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except CatalogError:
            raise
        except OverflowError as e:  # SQLite: a Python int beyond 64 bits (callers check ranges; this is the net)
            raise CatalogError(f"a number is out of the catalog's range: {e}") from e
        except (OperationalError, DBAPIError) as e:
            if isinstance(e, IntegrityError):
                raise
            first = str(e.orig).strip().splitlines()[0] if e.orig is not None else str(e)
            if isinstance(
                e, DataError
            ):  # a value the column refuses (out of range): the request's fault, not an outage
                raise CatalogError(f"a value is out of the catalog's range: {first}") from e
            if isinstance(e, DBAPIError) and _is_permission_error(e):
                raise CatalogReadOnly(
                    f"this catalog role cannot write to {display_url(self.url)} ({first}); "
                    "it can read datasets but not record versions, datasets or tags"
                ) from e
            raise CatalogUnavailable(f"catalog {display_url(self.url)} failed: {first}") from e

    def _fresh(self) -> None:
        """Follow an SQLite catalog to the file at its path now (``dal.catalog.filewatch``): a replaced file is
        connected to anew and checked as a new handle checks it.

        Raises:
            CatalogUnavailable: the file was deleted. CatalogOutOfDate: the new file needs ``dal db upgrade``.
        """
        if self._watch is None or not self._watch.check() or not self._create:
            return
        try:
            with self._translate():
                migrate.ensure_current(self._engine)
        except BaseException:
            self._watch.opened = None  # checked again at the next use, and refused again
            raise

    @contextmanager
    def _read(self) -> Iterator[Session]:
        self._fresh()
        with self._translate(), Session(self._engine) as s:
            yield s

    @contextmanager
    def _write(self) -> Iterator[Session]:
        self._fresh()
        with self._translate(), Session(self._write_engine) as s, s.begin():
            yield s

    def check_writable(self, name: str | None = None, *, manage: bool = False) -> None:
        """Refuse early, before any data is written to storage, when this role cannot record versions.

        PostgreSQL: the privileges recording needs (``has_table_privilege`` / ``has_sequence_privilege``
        of the current user). SQLite: a write transaction that changes nothing (a read-only file,
        medium or ``mode=ro`` connection refuses it).

        Args:
            name: the dataset about to be written (a ``dal serve`` catalog checks the principal's WRITE grant on
                it before the client touches storage; a database's role has one set of privileges for every
                dataset, so it is not used here).
            manage: the dataset is about to be dropped, purged, optimized or collected (``dal serve``: MANAGE).

        Raises:
            CatalogReadOnly: naming what is missing.
            CatalogUnavailable: the database cannot be reached.
        """
        self._fresh()
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

    @property
    def catalog_id(self) -> str:
        """This catalog's identity: the random id its migration recorded (a location's claim names it; two URLs
        of one database are one catalog). Recorded anew, once, if someone deleted the row.

        Raises:
            CatalogUnavailable: the database cannot be reached.
            CatalogReadOnly: the row is missing and this role cannot write it.
        """
        if self._catalog_id is None:
            with self._read() as s:
                found = s.scalar(select(CatalogRow.id).order_by(CatalogRow.id).limit(1))
            if found is None:
                with self._write() as s:
                    found = s.scalar(select(CatalogRow.id).order_by(CatalogRow.id).limit(1))
                    if found is None:
                        found = str(uuid.uuid4())
                        s.add(CatalogRow(id=found))
            self._catalog_id = str(found)
        return self._catalog_id

    @property
    def display(self) -> str:
        """This catalog's URL with any password masked (for messages and claims)."""
        return display_url(self.url)

    def revision(self) -> str | None:
        """The catalog schema revision recorded in the database.

        Returns:
            The alembic revision (``"0006"``), or ``None`` when never migrated.

        Raises:
            CatalogUnavailable: the database cannot be reached.
        """
        self._fresh()
        with self._translate(), self._engine.connect() as conn:
            return migrate.current_revision(conn)

    def upgrade(self) -> tuple[str | None, str]:
        """Upgrade the catalog schema to this dal's head revision (``dal db upgrade``).

        Returns:
            (the revision before, the revision after).

        Raises:
            CatalogUnavailable: the database cannot be reached.
            CatalogReadOnly: this role cannot change the schema.
        """
        if self._watch is not None:
            self._watch.check()  # a replaced file is connected to anew and upgraded (not refused, as _fresh does)
        with self._translate():
            return migrate.upgrade(self._engine)

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
    def _numbered(s: Session, dataset_id: int, number: object) -> VersionRow | None:
        """The version ``number`` of the dataset, or None: also for a number no version can have (out of the
        INTEGER column's range, a bool, not an int), which never reaches the database."""
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= MAX_VERSION:
            return None
        return s.scalar(select(VersionRow).where(VersionRow.dataset_id == dataset_id, VersionRow.number == number))

    @staticmethod
    def _tags(s: Session, dataset_id: int) -> Sequence[str]:
        return s.scalars(select(TagRow.name).where(TagRow.dataset_id == dataset_id)).all()

    def _resolve(self, s: Session, ds: DatasetRow, ref: VersionRef) -> VersionRow:
        base = select(VersionRow).where(VersionRow.dataset_id == ds.id)
        want = rows.reference(ref)  # InvalidName for a bool, float, …; ASCII digit strings become numbers
        if want.latest:
            row = s.scalar(base.order_by(VersionRow.number.desc()).limit(1))
            if row is None:
                raise VersionNotFound(f"any version of {ds.name!r}", hint="the dataset has no versions yet")
            return row
        if want.number is not None:
            row = None if want.out_of_range else s.scalar(base.where(VersionRow.number == want.number))
            if row is None:
                latest = "none yet" if ds.current_version < 0 else f"0..{ds.current_version}"
                raise VersionNotFound(f"version {want.number} of {ds.name!r}", hint=f"versions are {latest}")
            return row
        if want.tag is not None:
            tag = s.scalar(select(TagRow).where(TagRow.dataset_id == ds.id, TagRow.name == want.tag))
            if tag is not None:
                return s.get_one(VersionRow, tag.version_id)
        at = want.time
        if at is None:
            tags = self._tags(s, ds.id)
            raise VersionNotFound(
                f"version {want.text!r} of {ds.name!r}",
                want.text or "",
                tags,
                hint=f"tags are {', '.join(sorted(tags))}" if tags else "it has no tags",
            )
        return self._as_of(s, ds, base, as_utc(at))

    @staticmethod
    def _as_of(s: Session, ds: DatasetRow, base: Select[VersionRow], at: datetime) -> VersionRow:
        """The version current at ``at``: the newest created at or before it."""
        now = utcnow()
        if at > now:
            # the future has no answer yet: every commit until then would change it, so "as of" a later time
            # is refused rather than pinning today's latest. A time between the latest version and now is
            # that latest version (what is committed from now on is stamped later; docs/reading.md)
            last = s.scalar(base.order_by(VersionRow.number.desc()).limit(1))
            latest = (
                f"its latest version, {last.number}, is from {as_utc(last.created_at).isoformat()}"
                if last is not None
                else "it has no versions yet"
            )
            raise VersionNotFound(
                f"a version of {ds.name!r} as of {at.isoformat()}",
                hint=f"that time is in the future (it is {now.isoformat(timespec='seconds')}); {latest}: give a "
                "time up to now, a version number or a tag (or no version for the latest)",
            )
        row = s.scalar(base.where(VersionRow.created_at <= at).order_by(VersionRow.number.desc()).limit(1))
        if row is None:
            first = s.scalar(base.order_by(VersionRow.number).limit(1))
            hint = f"its first version is from {first.created_at.isoformat()}" if first else "it has no versions"
            raise VersionNotFound(f"a version of {ds.name!r} as of {at.isoformat()}", hint=hint)
        return row

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
        return rows.schema(rows.columns(f, rows.FIELD_COLUMNS) for f in row.fields)

    @staticmethod
    def _dataset_info(r: DatasetRow | Row[*tuple[Any, ...]]) -> DatasetInfo:
        return rows.dataset_info(rows.columns(r, rows.DATASET_COLUMNS))

    def _version_info(
        self,
        name: str,
        r: VersionRow | Row[*tuple[Any, ...]],
        schema: Schema | None = None,
        tags: Sequence[str] | None = None,
    ) -> VersionInfo:
        """The frozen value of a version: from its ORM row (its schema and tags loaded through it), or from a
        row of the version's columns with its ``schema`` and ``tags`` (``Catalog.versions``, in bulk)."""
        if schema is None:
            assert isinstance(r, VersionRow)
            schema = self._schema(r.schema)
        if tags is None:
            assert isinstance(r, VersionRow)
            tags = [t.name for t in r.tags]
        return rows.version_info(name, rows.columns(r, rows.VERSION_COLUMNS), schema, tags)
