"""Quick read-only queries of an existing, up-to-date catalog over the plain DB-API (sqlite3, psycopg): no SQLAlchemy.

The CLI's browsing commands (``dal ls``, ``dal show``, ``dal versions``) and shell completion run dozens of times
an hour; SQLAlchemy alone costs them about a third of a second of CPU to import. ``connect(url)`` answers a
``LiteCatalog`` when it can serve the URL exactly as ``Catalog`` would: an SQLite file that exists (a plain
``sqlite:///path`` URL) or a PostgreSQL URL for psycopg, at the revision this dal needs (``dal.catalog.revision``).
Anything else (a missing file, an out-of-date or newer catalog, another driver, URL options) is ``None``: the
caller uses ``Catalog``, which creates, refuses or explains as usual. The methods return the same frozen values,
with the same errors, as ``Catalog``'s of the same name (tests/catalog/test_lite.py compares them).

An SQLite reader keeps its one connection (a file: nothing to run out of). A PostgreSQL reader holds none: each
call connects, runs its queries and closes, so a process that pins a version and then trains for hours holds no
connection slot, and hundreds of ranks that start together take slots only for the few milliseconds of their pin
(``pin`` is one statement: one round trip after connecting). A refusal for now ("too many connections") is
retried with backoff (``dal.catalog.retry``). The connections are pooler-safe (PgBouncer in transaction mode): each
statement is its own transaction (autocommit), nothing is ``SET`` on the session, and no statement is prepared
on the server (``prepare_threshold=None``), since a pooler may run the next transaction on another server
connection, where a prepared statement or a setting would not exist.

Why one module: it is one class, ``LiteCatalog``, whose every query answers for a ``Catalog`` method of the same
name; the connection plumbing for both backends is a few lines. The row-to-value conversions and the reading of a
version reference are ``Catalog``'s own, shared through ``dal.catalog.rows`` (which imports no SQLAlchemy).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial, wraps
from typing import Any, ParamSpec, Protocol, TypeVar

from dal.catalog import retry
from dal.catalog import rows as shared  # the row conversions Catalog uses too
from dal.catalog.errors import CatalogUnavailable, DatasetNotFound, VersionNotFound
from dal.catalog.filewatch import FileId, Watched, checkpoint, file_id
from dal.catalog.revision import HEAD, VERSION_TABLE
from dal.catalog.types import (
    DatasetInfo,
    Label,
    Schema,
    VersionInfo,
    parse_label,
    row_limit,
    sorted_labels,
    validate_name,
    validate_text,
)
from dal.catalog.urls import MAX_URL_LENGTH, mask_url

SQLITE_BUSY_TIMEOUT_S = 120
_PARAM = re.compile(r":([a-z_][a-z0-9_]*)")
_DATASET_COLUMNS = ", ".join(shared.DATASET_COLUMNS)
_VERSION_COLUMNS = ", ".join(shared.VERSION_COLUMNS)
_FIELD_COLUMNS = ", ".join(shared.FIELD_COLUMNS)
_V_COLUMNS = ", ".join(f"v.{c}" for c in _VERSION_COLUMNS.split(", "))  # the same, from dal_versions v
_PIN_COLUMNS = (  # pin's statement on PostgreSQL: the dataset (d) and its version (p)
    ", ".join(f"d.{c}" for c in _DATASET_COLUMNS.split(", ")),
    ", ".join(f"p.{c}" for c in _VERSION_COLUMNS.split(", ")),
)
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

    def labels(self, name: str) -> tuple[Label, ...]: ...

    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]: ...


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


def _postgres_connect(conninfo: str, where: str, patience: float | None) -> Any:
    """A new autocommit connection that prepares nothing on the server (see the module's docstring), a refusal for
    now retried (``dal.catalog.retry``)."""
    import psycopg

    return retry.connect(
        lambda: psycopg.connect(conninfo, autocommit=True, prepare_threshold=None), where, patience=patience
    )


def connect(url: str, *, wait: bool = True, check: bool = True) -> LiteCatalog | None:
    """A quick reader for ``url``, or None when ``Catalog`` must handle it (see the module's docstring).

    Args:
        url: the catalog URL.
        wait: retry a PostgreSQL server's refusal for now (``dal.catalog.retry``); False: one attempt (shell completion
            never waits), for this call and every later one of the reader.
        check: PostgreSQL: connect now to check that the catalog is at this dal's revision. False: connect at the
            first call; only for ``pin``, whose one statement checks the revision itself (``dal.open``: one
            connection per open, the first one included).
    """
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:  # Catalog refuses it in one line
        return None
    try:
        path = _sqlite_path(url)
        if path is not None:
            if not os.path.isfile(path):
                return None
            opened = file_id(path)  # before connecting, and again after: see catalog.filewatch
            conn = _sqlite_connect(path)
            opened = opened if opened == file_id(path) else None
            reader = LiteCatalog(url, conn, "sqlite", file=path, opened=opened)
        else:
            conninfo = _postgres_conninfo(url)
            if conninfo is None:
                return None
            from psycopg.conninfo import conninfo_to_dict

            conninfo_to_dict(conninfo)  # no driver, a URL libpq reads differently: Catalog says it properly
            patience = None if wait else 0
            reader = LiteCatalog(
                url, None, "postgresql", connect=partial(_postgres_connect, conninfo, mask_url(url), patience)
            )
            if not check:
                return reader
    except Exception:
        return None
    try:
        with reader._session():
            if reader.revision() == HEAD:
                return reader
    except Exception:  # a server down or refusing, no catalog tables yet, or not a catalog at all
        pass
    reader.close()
    return None


def _current(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """A public query, in one ``LiteCatalog._session``: on SQLite answered whole from the file at the reader's path
    now, one query at a time (its statements are never answered by two files); on PostgreSQL on a connection of its
    own, closed after it."""

    @wraps(method)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        self = args[0]
        assert isinstance(self, LiteCatalog)
        with self._session():
            return method(*args, **kwargs)

    return run


class LiteCatalog:
    """Read-only catalog queries over the DB-API (``connect`` makes one).

    Args:
        url: the catalog URL.
        conn: a DB-API connection to it, kept (SQLite); None with ``connect``.
        dialect: ``sqlite`` or ``postgresql``.
        file: an SQLite catalog's file, watched (``dal.catalog.filewatch``): a replaced file is connected to anew,
            a deleted one refused.
        opened: the identity of that file, taken before ``conn`` opened it.
        connect: makes a connection for each call, closed after it (PostgreSQL; see the module's docstring).
    """

    def __init__(
        self,
        url: str,
        conn: Any,
        dialect: str,
        *,
        file: str | None = None,
        opened: FileId | None = None,
        connect: Callable[[], Any] | None = None,
    ) -> None:
        self.url = url
        self._conn: Any = conn
        self.dialect = dialect
        self._connect = connect
        self._call = threading.local()  # with ``connect``: the connection of the call running in this thread
        self._schemas: dict[int, Schema] = {}
        # one query at a time on the kept connection (``dal.open`` from threads); re-entered by a query's statements
        self._lock = threading.RLock()
        self._watch = None if file is None else Watched(file, url, self._flush, self._drop)
        if self._watch is not None:
            self._watch.opened = opened

    def __repr__(self) -> str:
        return f"LiteCatalog({mask_url(self.url)!r})"

    def close(self) -> None:
        """Close the kept connection (a per-call one closes when its call ends)."""
        try:
            if self._conn is not None:
                self._conn.close()
        except Exception:  # closing a connection that broke
            pass

    @contextmanager
    def _session(self) -> Iterator[None]:
        """One public call: on the kept connection, one call at a time, after following the SQLite file; or on a
        new connection (``connect``), closed when the call (and any call it makes) ends.

        Raises:
            CatalogUnavailable: no connection (still refused at the end of ``dal.catalog.retry``'s budget, or failed).
        """
        if self._connect is None:
            with self._lock:
                self._follow()
                yield
            return
        if getattr(self._call, "conn", None) is not None:  # a call inside a call (version -> pin)
            yield
            return
        with self._failures():
            conn = self._connect()
        self._call.conn = conn
        try:
            yield
        finally:
            self._call.conn = None
            try:
                conn.close()
            except Exception:  # closing a connection that broke
                pass

    def _flush(self, old: FileId) -> bool | None:
        """Empty the log of the file ``old`` through the connection, when it is on that file
        (``dal.catalog.filewatch.retire``), after any query running on it."""
        with self._lock:
            if self._conn is None or self._watch is None or self._watch.opened != old:
                return None
            return checkpoint(self._conn)

    def _drop(self) -> None:
        """Close the connection, after any query running on it (``dal.catalog.filewatch.retire``)."""
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
        conn = self._conn if self._connect is None else getattr(self._call, "conn", None)
        if conn is None:
            raise CatalogUnavailable(f"catalog {mask_url(self.url)}: this reader's connection was closed")
        lock: AbstractContextManager[Any] = self._lock if self._connect is None else nullcontext()
        with self._failures(), lock:
            cur = conn.cursor()
            try:
                cur.execute(sql, dict(params or {}))
                return [tuple(r) for r in cur.fetchall()]
            finally:
                cur.close()

    def revision(self) -> str | None:
        rows = self._rows(f"SELECT version_num FROM {VERSION_TABLE}")  # noqa: S608  (a constant)
        return str(rows[0][0]) if len(rows) == 1 else None

    def _dataset_row(self, name: str) -> tuple[Any, ...]:
        validate_name(name)
        rows = self._rows(f"SELECT {_DATASET_COLUMNS} FROM dal_datasets WHERE name = :name", {"name": name})  # noqa: S608
        if not rows:
            names = [r[0] for r in self._rows("SELECT name FROM dal_datasets")]
            raise DatasetNotFound(f"dataset {name!r}", name, names)
        return rows[0]

    def _schema(self, schema_id: int) -> Schema:
        if schema_id not in self._schemas:
            self._schemas[schema_id] = shared.schema(
                self._rows(
                    f"SELECT {_FIELD_COLUMNS} FROM dal_schema_fields WHERE schema_id = :s ORDER BY position",  # noqa: S608
                    {"s": schema_id},
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
        return [shared.version_info(name, r, self._schema(r[8]), tags.get(r[0], ())) for r in rows]

    # -- the read-only API (as Catalog's) ---------------------------------------------------------

    @staticmethod
    def _where(pattern: str | None) -> tuple[str, dict[str, Any]]:
        validate_text(pattern, "pattern", optional=True, max_length=1000)
        if not pattern:
            return "", {}
        if any(c in pattern for c in "*?"):
            return "WHERE name LIKE :p ESCAPE '\\'", {"p": shared.like_pattern(pattern)}
        where = "WHERE lower(name) LIKE :p ESCAPE '\\' OR lower(description) LIKE :p ESCAPE '\\'"
        return where, {"p": f"%{shared.like_pattern(pattern.lower())}%"}

    @_current
    def list_datasets(self, pattern: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Datasets sorted by name (``Catalog.list_datasets``)."""
        where, params = self._where(pattern)
        tail = f" LIMIT {row_limit(limit)}" if limit is not None else ""
        sql = f"SELECT {_DATASET_COLUMNS} FROM dal_datasets {where} ORDER BY name{tail}"  # noqa: S608
        return [shared.dataset_info(r) for r in self._rows(sql, params)]

    @_current
    def latest_sizes(self, pattern: str | None = None, *, limit: int | None = None) -> dict[str, tuple[int, int]]:
        """Row count and size in bytes of the latest version of each dataset ``list_datasets`` lists (those with a
        version), in one query."""
        where, params = self._where(pattern)
        tail = f" LIMIT {row_limit(limit)}" if limit is not None else ""
        sql = (
            "SELECT d.name, v.row_count, v.size_bytes FROM (SELECT id, name, current_version FROM dal_datasets "  # noqa: S608
            f"{where} ORDER BY name{tail}) d JOIN dal_versions v ON v.dataset_id = d.id AND v.number = d.current_version"
        )
        return {str(r[0]): (int(r[1]), int(r[2])) for r in self._rows(sql, params)}

    @_current
    def get_dataset(self, name: str) -> DatasetInfo:
        return shared.dataset_info(self._dataset_row(name))

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
        On PostgreSQL one statement (one round trip), which also checks the catalog's revision.

        Raises:
            InvalidName: not a version reference, or not a name. DatasetNotFound (for a reference it resolves).
        """
        want = shared.reference(ref)
        validate_name(name)
        params: dict[str, Any] = {}
        if want.latest:
            join, where = "", ""
        elif want.number is not None and not want.out_of_range:
            join, where, params = "", "AND v.number = :n", {"n": want.number}
        elif want.tag is not None:
            join = "JOIN dal_tags t ON t.version_id = v.id AND t.dataset_id = v.dataset_id"
            where, params = "AND t.name = :t", {"t": want.tag}
        else:
            return None  # a time, a number out of range, text that is no tag: Catalog's
        if self.dialect == "postgresql":
            return self._pin_in_one(name, join, where, params)
        ds = self._dataset_row(name)
        sql = (
            f"SELECT {_V_COLUMNS} FROM dal_versions v {join} WHERE v.dataset_id = :d {where} "  # noqa: S608
            "ORDER BY v.number DESC LIMIT 1"
        )
        rows = self._rows(sql, {"d": ds[0], **params})
        return (shared.dataset_info(ds), self._versions(ds[1], rows)[0]) if rows else None

    def _pin_in_one(
        self, name: str, join: str, where: str, params: dict[str, Any]
    ) -> tuple[DatasetInfo, VersionInfo] | None:
        """``pin`` on PostgreSQL in one statement: the revision, the dataset, its version ``join``/``where`` select
        (the newest of them), the version's tags and schema fields (as JSON), and the names of all datasets when
        there is no such dataset (for ``DatasetNotFound``'s suggestions)."""
        sql = (
            f"SELECT r.version_num, {_PIN_COLUMNS[0]}, {_PIN_COLUMNS[1]}, "  # noqa: S608
            "(SELECT json_agg(g.name ORDER BY g.name) FROM dal_tags g WHERE g.version_id = p.id), "
            f"(SELECT json_agg(json_build_array({', '.join(f'f.{c}' for c in shared.FIELD_COLUMNS)}) "
            "ORDER BY f.position) FROM dal_schema_fields f WHERE f.schema_id = p.schema_id), "
            "CASE WHEN d.id IS NULL THEN (SELECT json_agg(n.name) FROM dal_datasets n) END "
            f"FROM {VERSION_TABLE} r LEFT JOIN dal_datasets d ON d.name = :name "
            f"LEFT JOIN dal_versions p ON p.id = (SELECT v.id FROM dal_versions v {join} WHERE v.dataset_id = d.id "
            f"{where} ORDER BY v.number DESC LIMIT 1)"
        )
        rows = self._rows(sql, {"name": name, **params})
        if len(rows) != 1 or str(rows[0][0]) != HEAD:
            return None  # a catalog at another revision now: Catalog refuses or explains
        d_end = 1 + len(_DATASET_COLUMNS.split(", "))
        v_end = d_end + len(_VERSION_COLUMNS.split(", "))
        ds, version, (tags, fields, names) = rows[0][1:d_end], rows[0][d_end:v_end], rows[0][v_end:]
        if ds[0] is None:
            raise DatasetNotFound(f"dataset {name!r}", name, names or ())
        if version[0] is None:
            return None
        return shared.dataset_info(ds), shared.version_info(ds[1], version, shared.schema(fields or ()), tags or ())

    @_current
    def versions(self, name: str, *, limit: int | None = None) -> list[VersionInfo]:
        """The history of ``name``, oldest first; ``limit``: only the newest ``limit`` versions."""
        ds = self._dataset_row(name)
        if limit is None:
            sql = f"SELECT {_VERSION_COLUMNS} FROM dal_versions WHERE dataset_id = :d ORDER BY number"  # noqa: S608
            rows = self._rows(sql, {"d": ds[0]})
        else:
            sql = f"SELECT {_VERSION_COLUMNS} FROM dal_versions WHERE dataset_id = :d ORDER BY number DESC LIMIT :n"  # noqa: S608
            rows = self._rows(sql, {"d": ds[0], "n": row_limit(limit)})[::-1]
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

    @_current
    def labels(self, name: str) -> tuple[Label, ...]:
        """The labels of ``name`` and of its columns (``Catalog.labels``)."""
        ds = self._dataset_row(name)
        rows = self._rows("SELECT column_name, text FROM dal_labels WHERE dataset_id = :d", {"d": ds[0]})
        return sorted_labels(Label(c or None, *parse_label(t)) for c, t in rows)

    # -- shell completion --------------------------------------------------------------------------

    @_current
    def dataset_names(self, prefix: str = "", *, limit: int = 1000) -> list[str]:
        """Names starting with ``prefix`` (case-sensitive), sorted, at most ``limit``."""
        rows = self._rows(
            "SELECT name FROM dal_datasets WHERE name LIKE :p ESCAPE '\\' ORDER BY name LIMIT :n",
            {
                "p": shared.like_pattern(prefix) + "%",
                "n": row_limit(row_limit(limit) * 4),
            },  # SQLite's LIKE ignores case: filtered below
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
