"""Quick read-only queries of an existing, up-to-date catalog over the plain DB-API (sqlite3, psycopg): no SQLAlchemy.

The CLI's browsing commands (``dal ls``, ``dal show``, ``dal versions``) and shell completion run dozens of times
an hour; SQLAlchemy alone costs them about a third of a second of CPU to import. ``connect(url)`` answers a
``LiteCatalog`` when it can serve the URL exactly as ``Catalog`` would: an SQLite file that exists (a plain
``sqlite:///path`` URL) or a PostgreSQL URL for psycopg, at the revision this dal needs (``catalog.revision``).
Anything else (a missing file, an out-of-date or newer catalog, another driver, URL options) is ``None``: the
caller uses ``Catalog``, which creates, refuses or explains as usual. The methods return the same frozen values,
with the same errors, as ``Catalog``'s of the same name (tests/catalog/test_lite.py compares them).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from catalog.errors import CatalogUnavailable, DatasetNotFound, VersionNotFound
from catalog.revision import HEAD, VERSION_TABLE
from catalog.types import (
    MAX_VERSION,
    TAG_TEXT,
    DatasetInfo,
    Field,
    Schema,
    VersionInfo,
    validate_name,
    validate_text,
    version_ref,
)
from catalog.urls import MAX_URL_LENGTH, mask_url

SQLITE_BUSY_TIMEOUT_S = 120
_PARAM = re.compile(r":([a-z_][a-z0-9_]*)")
_DATASET_COLUMNS = (
    "id, name, format, location, description, owner, time_column, created_at, updated_at, current_version, properties"
)
_VERSION_COLUMNS = (
    "id, number, created_at, operation, row_count, file_count, size_bytes, storage_version, schema_id, "
    "partition_columns, properties"
)
_V_COLUMNS = ", ".join(f"v.{c}" for c in _VERSION_COLUMNS.split(", "))  # the same, from dal_versions v


class CatalogReader(Protocol):
    """What the catalog's read-only views need (``Catalog`` and ``LiteCatalog`` both have it)."""

    url: str

    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]: ...

    def get_dataset(self, name: str) -> DatasetInfo: ...

    def version(self, name: str, ref: Any = None) -> VersionInfo: ...

    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]: ...

    def tags(self, name: str) -> dict[str, int]: ...

    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]: ...


def _like_pattern(pattern: str) -> str:
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _sqlite_path(url: str) -> str | None:
    """The file of a plain ``sqlite:///path`` URL (as SQLAlchemy reads it), None for any other form."""
    if not url.startswith("sqlite:///") or any(c in url for c in "?%#~\x00"):
        return None
    path = url[len("sqlite:///") :]
    return path if path and path != ":memory:" else None


def _postgres_conninfo(url: str) -> str | None:
    """A libpq URL for psycopg from a SQLAlchemy ``postgresql://`` or ``postgresql+psycopg://`` URL."""
    for prefix in ("postgresql+psycopg://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql://" + url[len(prefix) :]
    return None


def connect(url: str) -> LiteCatalog | None:
    """A quick reader for ``url``, or None when ``Catalog`` must handle it (see the module's docstring)."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:  # Catalog refuses it in one line
        return None
    try:
        path = _sqlite_path(url)
        if path is not None:
            if not os.path.isfile(path):
                return None
            import sqlite3

            conn: Any = sqlite3.connect(
                f"file:{path}?mode=rw", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False
            )
            dialect = "sqlite"
        else:
            conninfo = _postgres_conninfo(url)
            if conninfo is None:
                return None
            import psycopg

            conn = psycopg.connect(conninfo, autocommit=True)
            dialect = "postgresql"
    except Exception:  # no driver, a URL psycopg reads differently, a server down: Catalog says it properly
        return None
    reader = LiteCatalog(url, conn, dialect)
    try:
        if reader.revision() == HEAD:
            return reader
    except Exception:  # no catalog tables yet, or not a catalog at all
        pass
    reader.close()
    return None


class LiteCatalog:
    """Read-only catalog queries on one DB-API connection (``connect`` makes one)."""

    def __init__(self, url: str, conn: Any, dialect: str) -> None:
        self.url = url
        self._conn = conn
        self.dialect = dialect
        self._schemas: dict[int, Schema] = {}
        self._lock = threading.Lock()  # one statement at a time on the connection (``dal.open`` from threads)

    def __repr__(self) -> str:
        return f"LiteCatalog({mask_url(self.url)!r})"

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # closing a connection that broke
            pass

    # -- plumbing -----------------------------------------------------------------------------

    @contextmanager
    def _failures(self) -> Iterator[None]:
        try:
            yield
        except (DatasetNotFound, VersionNotFound):
            raise
        except Exception as e:
            if type(e).__module__.split(".")[0] not in ("sqlite3", "psycopg"):
                raise
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise CatalogUnavailable(f"catalog {mask_url(self.url)} failed: {first}") from e

    def _rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[tuple[Any, ...]]:
        if self.dialect == "postgresql":
            sql = _PARAM.sub(r"%(\1)s", sql)
        with self._failures(), self._lock:
            cur = self._conn.cursor()
            try:
                cur.execute(sql, dict(params or {}))
                return [tuple(r) for r in cur.fetchall()]
            finally:
                cur.close()

    def revision(self) -> str | None:
        rows = self._rows(f"SELECT version_num FROM {VERSION_TABLE}")  # noqa: S608  (a constant)
        return str(rows[0][0]) if len(rows) == 1 else None

    def _dataset(self, r: Sequence[Any]) -> DatasetInfo:
        return DatasetInfo(
            name=r[1],
            format=r[2],
            location=r[3],
            description=r[4],
            owner=r[5],
            time_column=r[6],
            created_at=_utc(r[7]),
            updated_at=_utc(r[8]),
            latest_version=None if r[9] < 0 else int(r[9]),
            properties=dict(_json(r[10]) or {}),
        )

    def _dataset_row(self, name: str) -> tuple[Any, ...]:
        validate_name(name)
        rows = self._rows(f"SELECT {_DATASET_COLUMNS} FROM dal_datasets WHERE name = :name", {"name": name})  # noqa: S608
        if not rows:
            names = [r[0] for r in self._rows("SELECT name FROM dal_datasets")]
            raise DatasetNotFound(f"dataset {name!r}", name, names)
        return rows[0]

    def _schema(self, schema_id: int) -> Schema:
        if schema_id not in self._schemas:
            rows = self._rows(
                "SELECT name, type, nullable, dtype, shape, codec FROM dal_schema_fields WHERE schema_id = :s "
                "ORDER BY position",
                {"s": schema_id},
            )
            self._schemas[schema_id] = Schema(
                tuple(
                    Field(
                        name=n,
                        type=t,
                        nullable=bool(nullable),
                        dtype=dtype,
                        shape=None if (shape := _json(raw_shape)) is None else tuple(shape),
                        codec=codec,
                    )
                    for n, t, nullable, dtype, raw_shape, codec in rows
                )
            )
        return self._schemas[schema_id]

    def _versions(self, name: str, rows: list[tuple[Any, ...]]) -> list[VersionInfo]:
        tags: dict[int, list[str]] = {}
        if rows:
            ids = {f"v{i}": r[0] for i, r in enumerate(rows)}
            placeholders = ", ".join(f":{k}" for k in ids)
            for version_id, tag in self._rows(
                f"SELECT version_id, name FROM dal_tags WHERE version_id IN ({placeholders}) ORDER BY name",  # noqa: S608
                ids,
            ):
                tags.setdefault(version_id, []).append(tag)
        return [
            VersionInfo(
                dataset=name,
                number=r[1],
                created_at=_utc(r[2]),
                operation=r[3],
                row_count=r[4],
                file_count=r[5],
                size_bytes=r[6],
                storage_version=r[7],
                schema=self._schema(r[8]),
                partition_columns=tuple(_json(r[9]) or ()),
                tags=tuple(tags.get(r[0], ())),
                properties=dict(_json(r[10]) or {}),
            )
            for r in rows
        ]

    # -- the read-only API (as Catalog's) ---------------------------------------------------------

    @staticmethod
    def _where(pattern: str | None) -> tuple[str, dict[str, Any]]:
        validate_text(pattern, "pattern", optional=True, max_length=1000)
        if not pattern:
            return "", {}
        if any(c in pattern for c in "*?"):
            return "WHERE name LIKE :p ESCAPE '\\'", {"p": _like_pattern(pattern)}
        where = "WHERE lower(name) LIKE :p ESCAPE '\\' OR lower(description) LIKE :p ESCAPE '\\'"
        return where, {"p": f"%{_like_pattern(pattern.lower())}%"}

    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Datasets sorted by name (``Catalog.list_datasets``)."""
        where, params = self._where(pattern)
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        sql = f"SELECT {_DATASET_COLUMNS} FROM dal_datasets {where} ORDER BY name{tail}"  # noqa: S608
        return [self._dataset(r) for r in self._rows(sql, params)]

    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]:
        """Row count and size in bytes of the latest version of each dataset ``list_datasets`` lists (those with a
        version), in one query."""
        where, params = self._where(pattern)
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        sql = (
            "SELECT d.name, v.row_count, v.size_bytes FROM (SELECT id, name, current_version FROM dal_datasets "  # noqa: S608
            f"{where} ORDER BY name{tail}) d JOIN dal_versions v ON v.dataset_id = d.id AND v.number = d.current_version"
        )
        return {str(r[0]): (int(r[1]), int(r[2])) for r in self._rows(sql, params)}

    def get_dataset(self, name: str) -> DatasetInfo:
        return self._dataset(self._dataset_row(name))

    def version(self, name: str, ref: Any = None) -> VersionInfo:
        """The newest version (``ref`` None or ``"latest"``); other references are ``Catalog``'s to resolve."""
        if ref not in (None, "latest"):
            raise NotImplementedError("LiteCatalog resolves the latest version only")
        found = self.pin(name)
        if found is None:
            raise VersionNotFound(f"any version of {name!r}", hint="the dataset has no versions yet")
        return found[1]

    def pin(self, name: str, ref: Any = None) -> tuple[DatasetInfo, VersionInfo] | None:
        """The dataset and its version ``ref`` where this reader resolves it exactly as ``Catalog.version`` does:
        the newest (None, ``"latest"``), a number or a tag that exists. None for the rest (a time, a number or
        tag that is not there, a dataset without versions): ``Catalog.version`` resolves it or raises its error.

        Raises:
            InvalidName: not a version reference. DatasetNotFound.
        """
        ref = version_ref(ref)
        ds = self._dataset_row(name)
        if ref is None or ref == "latest":
            sql = f"SELECT {_V_COLUMNS} FROM dal_versions v WHERE v.dataset_id = :d ORDER BY v.number DESC LIMIT 1"  # noqa: S608
            rows = self._rows(sql, {"d": ds[0]})
        elif isinstance(ref, int):
            if not 0 <= ref <= MAX_VERSION:
                return None
            sql = f"SELECT {_V_COLUMNS} FROM dal_versions v WHERE v.dataset_id = :d AND v.number = :n"  # noqa: S608
            rows = self._rows(sql, {"d": ds[0], "n": ref})
        elif isinstance(ref, str) and TAG_TEXT.fullmatch(ref):
            sql = (
                f"SELECT {_V_COLUMNS} FROM dal_versions v JOIN dal_tags t ON t.version_id = v.id "  # noqa: S608
                "WHERE t.dataset_id = :d AND t.name = :t"
            )
            rows = self._rows(sql, {"d": ds[0], "t": ref})
        else:
            return None
        return (self._dataset(ds), self._versions(ds[1], rows)[0]) if rows else None

    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]:
        """The history of ``name``, oldest first; ``limit``: only the newest ``limit`` versions."""
        ds = self._dataset_row(name)
        if limit is None:
            sql = f"SELECT {_VERSION_COLUMNS} FROM dal_versions WHERE dataset_id = :d ORDER BY number"  # noqa: S608
            rows = self._rows(sql, {"d": ds[0]})
        else:
            sql = f"SELECT {_VERSION_COLUMNS} FROM dal_versions WHERE dataset_id = :d ORDER BY number DESC LIMIT :n"  # noqa: S608
            rows = self._rows(sql, {"d": ds[0], "n": max(0, int(limit))})[::-1]
        return self._versions(name, rows)

    def tags(self, name: str) -> dict[str, int]:
        ds = self._dataset_row(name)
        rows = self._rows(
            "SELECT t.name, v.number FROM dal_tags t JOIN dal_versions v ON v.id = t.version_id "
            "WHERE t.dataset_id = :d ORDER BY t.name",
            {"d": ds[0]},
        )
        return {t: n for t, n in rows}

    # -- shell completion --------------------------------------------------------------------------

    def dataset_names(self, prefix: str = "", *, limit: int = 1000) -> list[str]:
        """Names starting with ``prefix`` (case-sensitive), sorted, at most ``limit``."""
        rows = self._rows(
            "SELECT name FROM dal_datasets WHERE name LIKE :p ESCAPE '\\' ORDER BY name LIMIT :n",
            {"p": _like_pattern(prefix) + "%", "n": int(limit) * 4},  # SQLite's LIKE ignores case: filtered below
        )
        return [r[0] for r in rows if r[0].startswith(prefix)][:limit]

    def tag_names(self, name: str) -> dict[str, int]:
        """The tags of ``name`` and their version numbers ({} for an unknown dataset)."""
        rows = self._rows(
            "SELECT t.name, v.number FROM dal_tags t JOIN dal_versions v ON v.id = t.version_id "
            "JOIN dal_datasets d ON d.id = t.dataset_id WHERE d.name = :n ORDER BY t.name",
            {"n": name},
        )
        return {t: n for t, n in rows}
