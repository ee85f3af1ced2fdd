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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import wraps
from typing import Any, ParamSpec, Protocol, TypeVar

from catalog.errors import CatalogUnavailable, DatasetNotFound, VersionNotFound
from catalog.filewatch import FileId, Watched, checkpoint, file_id
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
_P = ParamSpec("_P")
_T = TypeVar("_T")


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


def _sqlite_connect(path: str) -> Any:
    import sqlite3

    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)


def connect(url: str) -> LiteCatalog | None:
    """A quick reader for ``url``, or None when ``Catalog`` must handle it (see the module's docstring)."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:  # Catalog refuses it in one line
        return None
    opened = None
    try:
        path = _sqlite_path(url)
        if path is not None:
            if not os.path.isfile(path):
                return None
            opened = file_id(path)  # before connecting, and again after: see catalog.filewatch
            conn: Any = _sqlite_connect(path)
            opened = opened if opened == file_id(path) else None
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
    reader = LiteCatalog(url, conn, dialect, file=path, opened=opened)
    try:
        if reader.revision() == HEAD:
            return reader
    except Exception:  # no catalog tables yet, or not a catalog at all
        pass
    reader.close()
    return None


def _current(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """A public query: answered whole from the file at the reader's path now (``LiteCatalog._follow``), one
    query at a time (its statements are never answered by two files)."""

    @wraps(method)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        self = args[0]
        assert isinstance(self, LiteCatalog)
        with self._lock:
            self._follow()
            return method(*args, **kwargs)

    return run


class LiteCatalog:
    """Read-only catalog queries on one DB-API connection (``connect`` makes one).

    Args:
        url: the catalog URL.
        conn: a DB-API connection to it.
        dialect: ``sqlite`` or ``postgresql``.
        file: an SQLite catalog's file, watched (``catalog.filewatch``): a replaced file is connected to anew,
            a deleted one refused.
        opened: the identity of that file, taken before ``conn`` opened it.
    """

    def __init__(
        self, url: str, conn: Any, dialect: str, *, file: str | None = None, opened: FileId | None = None
    ) -> None:
        self.url = url
        self._conn: Any = conn
        self.dialect = dialect
        self._schemas: dict[int, Schema] = {}
        # one query at a time on the connection (``dal.open`` from threads); re-entered by a query's statements
        self._lock = threading.RLock()
        self._watch = None if file is None else Watched(file, url, self._flush, self._drop)
        if self._watch is not None:
            self._watch.opened = opened

    def __repr__(self) -> str:
        return f"LiteCatalog({mask_url(self.url)!r})"

    def close(self) -> None:
        try:
            self._conn.close()
        except Exception:  # closing a connection that broke
            pass

    def _flush(self, old: FileId) -> bool | None:
        """Empty the log of the file ``old`` through the connection, when it is on that file
        (``catalog.filewatch.retire``), after any query running on it."""
        with self._lock:
            if self._conn is None or self._watch is None or self._watch.opened != old:
                return None
            return checkpoint(self._conn)

    def _drop(self) -> None:
        """Close the connection, after any query running on it (``catalog.filewatch.retire``)."""
        with self._lock:
            self.close()
            self._conn = None

    def _follow(self) -> None:
        """Connect anew when the SQLite file at the reader's path is another than its connection's (the
        schemas of the old file are forgotten), and check that it is a catalog this reader serves.

        Raises:
            CatalogUnavailable: the file was deleted, or the new one is not a catalog at this dal's revision
                (``Catalog`` then decides, as for a new reader).
        """
        if self._watch is None or (not self._watch.check() and self._conn is not None):
            return
        self._schemas.clear()
        try:
            with self._failures():
                self._conn = _sqlite_connect(self._watch.path)
            if file_id(self._watch.path) != self._watch.opened:
                self._watch.opened = None  # replaced again while connecting: which file it holds is unknown
            if self.revision() != HEAD:
                raise CatalogUnavailable(
                    f"catalog {mask_url(self.url)}: the file now at {self._watch.path} is not a catalog at revision "
                    f"{HEAD}"
                )
        except Exception as e:
            self._watch.opened = None  # checked again at the next use
            if isinstance(e, CatalogUnavailable):
                raise
            raise CatalogUnavailable(f"catalog {mask_url(self.url)} failed: {e}") from e

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
        if self._conn is None:
            raise CatalogUnavailable(f"catalog {mask_url(self.url)}: this reader's connection was closed")
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

    @_current
    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Datasets sorted by name (``Catalog.list_datasets``)."""
        where, params = self._where(pattern)
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        sql = f"SELECT {_DATASET_COLUMNS} FROM dal_datasets {where} ORDER BY name{tail}"  # noqa: S608
        return [self._dataset(r) for r in self._rows(sql, params)]

    @_current
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

    @_current
    def get_dataset(self, name: str) -> DatasetInfo:
        return self._dataset(self._dataset_row(name))

    @_current
    def version(self, name: str, ref: Any = None) -> VersionInfo:
        """The newest version (``ref`` None or ``"latest"``); other references are ``Catalog``'s to resolve."""
        if ref not in (None, "latest"):
            raise NotImplementedError("LiteCatalog resolves the latest version only")
        found = self.pin(name)
        if found is None:
            raise VersionNotFound(f"any version of {name!r}", hint="the dataset has no versions yet")
        return found[1]

    @_current
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

    @_current
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

    @_current
    def tags(self, name: str) -> dict[str, int]:
        ds = self._dataset_row(name)
        rows = self._rows(
            "SELECT t.name, v.number FROM dal_tags t JOIN dal_versions v ON v.id = t.version_id "
            "WHERE t.dataset_id = :d ORDER BY t.name",
            {"d": ds[0]},
        )
        return {t: n for t, n in rows}

    # -- shell completion --------------------------------------------------------------------------

    @_current
    def dataset_names(self, prefix: str = "", *, limit: int = 1000) -> list[str]:
        """Names starting with ``prefix`` (case-sensitive), sorted, at most ``limit``."""
        rows = self._rows(
            "SELECT name FROM dal_datasets WHERE name LIKE :p ESCAPE '\\' ORDER BY name LIMIT :n",
            {"p": _like_pattern(prefix) + "%", "n": int(limit) * 4},  # SQLite's LIKE ignores case: filtered below
        )
        return [r[0] for r in rows if r[0].startswith(prefix)][:limit]

    @_current
    def tag_names(self, name: str) -> dict[str, int]:
        """The tags of ``name`` and their version numbers ({} for an unknown dataset)."""
        rows = self._rows(
            "SELECT t.name, v.number FROM dal_tags t JOIN dal_versions v ON v.id = t.version_id "
            "JOIN dal_datasets d ON d.id = t.dataset_id WHERE d.name = :n ORDER BY t.name",
            {"n": name},
        )
        return {t: n for t, n in rows}
