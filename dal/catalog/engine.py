"""Catalog URLs and SQLAlchemy engines: where the embedded catalog lives, SQLite locking, Postgres driver.

A PostgreSQL engine keeps no connection between sessions (``NullPool``) unless asked to (``pooled``: a
long-running server, ``dal ui``): each session connects and closes, so a process that used the catalog once (a
training rank that pinned a version as of a time) holds no slot of ``max_connections`` while it trains, and a few
hundred such processes cannot exhaust the server. A catalog session is one or a few statements, and a connection
costs a few milliseconds on a LAN (where the pool saved it, its pre-ping spent a round trip of its own). A
refusal for now ("too many connections", a server restarting) is retried with backoff (``dal.catalog.retry``), and no
statement is prepared on the server (``prepare_threshold=None``), so the engine also works through a pooler in
transaction mode (PgBouncer), which may run each transaction on another server connection.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import NullPool, StaticPool

from dal.catalog import retry
from dal.catalog.errors import CatalogUnavailable
from dal.catalog.filewatch import FileId, Watched, checkpoint, file_id
from dal.catalog.home import ENV_HOME as ENV_HOME  # re-exported: they lived here (catalog.home needs no SQLAlchemy)
from dal.catalog.home import ENV_URL as ENV_URL
from dal.catalog.home import data_dir as data_dir
from dal.catalog.home import default_url as default_url
from dal.catalog.urls import MAX_URL_LENGTH, mask_url

SQLITE_BUSY_TIMEOUT_S = 120


def display_url(url: str | URL) -> str:
    """The URL with any password and credential-bearing query parameter masked, for messages."""
    try:
        return mask_url(make_url(url).render_as_string(hide_password=True))
    except (ArgumentError, ValueError, TypeError):
        return "<unparseable URL>"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # let SQLAlchemy's begin event own transactions (pysqlite's implicit BEGIN is not serialisable)
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.close()


def _sqlite_pragmas_read_only(dbapi_connection: Any, _record: Any) -> None:
    # no journal_mode: switching a read-only file to WAL is a write
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
    cur.close()


def _read_only_uri(file: Path) -> dict[str, str] | None:
    """The SQLite URI options that read ``file`` where this user cannot write it or its folder (None where it
    can): ``mode=ro``, plus ``immutable=1`` when no writer is active (no ``-wal`` file beside it). A WAL
    database needs its ``-shm`` index, which SQLite cannot create in a folder the user may not write, so a
    plain ``mode=ro`` open fails there; with a ``-wal`` present a writer keeps the ``-shm`` and ``mode=ro``
    reads through it."""
    folder = file.parent
    if os.access(file, os.W_OK) and os.access(folder, os.W_OK):
        return None
    options = {"mode": "ro"}
    if not os.access(folder, os.W_OK) and not file.with_name(file.name + "-wal").exists():
        options["immutable"] = "1"
    return options


def _sqlite_begin(conn: Any) -> None:
    # write transactions take the database lock up front, so two publishers never deadlock on upgrade
    immediate = conn.get_execution_options().get("dal_write", False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def missing_catalog(path: Path, url: str) -> CatalogUnavailable:
    """The error for reading an SQLite catalog file that does not exist (nothing is created by a read)."""
    return CatalogUnavailable(
        f"no catalog at {display_url(url)} ({path} does not exist): check --catalog / DAL_CATALOG_URL / the "
        "profile; a new catalog is created by the first write (dal write, dal register) or by `dal db upgrade`"
    )


def make_engine(url: str, *, must_exist: bool = False, pooled: bool = False) -> Engine:
    """An engine for a catalog URL (SQLite files get WAL and a busy timeout; Postgres uses psycopg 3).

    Args:
        url: the catalog URL.
        must_exist: for reads: an SQLite file that does not exist is an error, and neither it nor its
            folder is created.
        pooled: PostgreSQL: keep up to 5 connections between sessions (checked before reuse), for a long-running
            server; by default none is kept (see the module's docstring). SQLite files are always pooled.

    Raises:
        CatalogUnavailable: the URL is malformed, its driver is not installed (with the install hint), or
            (``must_exist``) the SQLite file does not exist.
    """
    parsed = _parse(url)
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if parsed.get_backend_name() == "sqlite":
        parsed = _sqlite_url(parsed, str(url), must_exist, kwargs)
    elif parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        if parsed.drivername == "postgresql+psycopg":
            kwargs["connect_args"] = {"prepare_threshold": None}
        if not pooled:
            kwargs = {"poolclass": NullPool, **kwargs, "pool_pre_ping": False}
    try:
        engine = create_engine(parsed, **kwargs)
    except (NoSuchModuleError, ModuleNotFoundError) as e:
        hint = " (pip install 'dal-catalog[postgres]')" if parsed.get_backend_name() == "postgresql" else ""
        raise CatalogUnavailable(f"no database driver for {display_url(parsed)}: {e}{hint}") from e
    if engine.dialect.name == "sqlite":
        read_only_file = str(parsed.database or "").startswith("file:") and parsed.query.get("mode") == "ro"
        event.listen(engine, "connect", _sqlite_pragmas_read_only if read_only_file else _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    elif engine.dialect.name == "postgresql":
        where = display_url(parsed)

        def connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
            return retry.connect(lambda: dialect.connect(*cargs, **cparams), where)

        event.listen(engine, "do_connect", connect)
    return engine


def sqlite_file(url: str) -> str | None:
    """The file an SQLite catalog URL's connections open (as ``make_engine`` opens it), None for an in-memory
    database or another backend."""
    parsed = _parse(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    if parsed.database.startswith("file:"):
        path, _, options = parsed.database[len("file:") :].partition("?")
        memory = "mode=memory" in options or parsed.query.get("mode") == "memory"
        return None if memory or not path or path == ":memory:" else unquote(path)
    return str(Path(parsed.database).expanduser())


def watch_file(engine: Engine, path: str, url: str) -> Watched:
    """Follow an SQLite engine's file (``dal.catalog.filewatch``): each connection remembers the file it opened
    (its identity before and after connecting: unknown when they differ), one on a file that is no longer at
    the path is closed when it comes back to the pool, and the engine's pool goes when the file changed.
    Call before the engine's first connection."""
    connections: weakref.WeakSet[Any] = weakref.WeakSet()

    def before(_dialect: Any, record: Any, _cargs: Any, _cparams: Any) -> None:
        record.info["dal.file_before"] = file_id(path)

    def opened(_dbapi_connection: Any, record: Any) -> None:
        was = record.info.pop("dal.file_before", None)
        record.info["dal.file"] = was if was is not None and was == file_id(path) else None
        connections.add(record)

    def returned(dbapi_connection: Any, record: Any) -> None:
        # a query that ran on another thread while the file was replaced: its connection is not used again
        if dbapi_connection is not None and record is not None and record.info.get("dal.file") != file_id(path):
            dbapi_connection.close()  # the pool's pre-ping connects anew

    def flush(old: FileId) -> bool | None:
        tried: bool | None = None
        for record in list(connections):
            conn = record.dbapi_connection
            if conn is not None and record.info.get("dal.file") == old:
                done = checkpoint(conn)
                if done:
                    return True
                tried = tried or done
        return tried

    event.listen(engine, "do_connect", before)
    event.listen(engine, "connect", opened)
    event.listen(engine, "checkin", returned)
    return Watched(path, url, flush, engine.dispose)


def _parse(url: str | URL) -> URL:
    """The parsed catalog URL.

    Raises:
        CatalogUnavailable: not a URL, or longer than ``MAX_URL_LENGTH`` (the message masks its password).
    """
    if isinstance(url, str) and len(url) > MAX_URL_LENGTH:
        raise CatalogUnavailable(f"invalid catalog URL: {len(url):,} characters long, at most {MAX_URL_LENGTH:,}")
    if not isinstance(url, str | URL) or "\x00" in str(url):
        raise CatalogUnavailable(f"invalid catalog URL {mask_url(url)!r}: expected a URL string without NUL")
    try:
        return make_url(url)
    except (ArgumentError, ValueError) as e:  # ValueError: e.g. a port that is not a number ('[::1')
        raise CatalogUnavailable(f"invalid catalog URL {mask_url(url)!r}: {mask_url(str(e))}") from e


def _sqlite_url(parsed: URL, url: str, must_exist: bool, kwargs: dict[str, Any]) -> URL:
    """An SQLite catalog's URL as the engine opens it (read-only where this user may not write the file), its
    folder created unless ``must_exist``; ``kwargs`` gets an in-memory database's pool.

    Raises:
        CatalogUnavailable: (``must_exist``) no such file, or its folder cannot be created.
    """
    if parsed.database and parsed.database.startswith("file:"):
        # an SQLite URI (``?uri=true``, e.g. ``mode=ro``): opened as given (no folder to create), except that
        # mode=ro on a WAL file in a folder this user cannot write also needs immutable=1 (see _read_only_uri)
        file = Path(unquote(parsed.database[len("file:") :].partition("?")[0]))
        if parsed.query.get("mode") == "ro" and "immutable" not in parsed.query and file.is_file():
            options = _read_only_uri(file) or {}
            if "immutable" in options:
                parsed = parsed.update_query_dict({"immutable": "1"})
    elif parsed.database and parsed.database != ":memory:":
        file = Path(parsed.database).expanduser()
        folder = file.parent
        if must_exist and not file.is_file():
            raise missing_catalog(file, url)
        read_only = _read_only_uri(file) if file.is_file() and not parsed.query else None
        if read_only is not None:  # a catalog this user may read but not write: reads work, writes refused
            parsed = parsed.set(database=f"file:{quote(str(file.absolute()))}", query={**read_only, "uri": "true"})
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CatalogUnavailable(
                f"cannot create the catalog's folder {folder} ({e.strerror or e}); set DAL_HOME or "
                "DAL_CATALOG_URL to a writable place"
            ) from e
    else:
        kwargs["poolclass"] = StaticPool
        kwargs["connect_args"] = {"check_same_thread": False}
    return parsed
