"""Create and upgrade the catalog schema with the alembic scripts shipped beside this package.

Alembic (with mako and its other imports, a third of a second) is imported only to create or upgrade a
catalog: an up-to-date one is recognised by a plain query of its revision against ``HEAD``.

Alembic's own INFO lines (plugin set-up, "Context impl SQLiteImpl", one per script) are held back while dal
migrates, unless the ``alembic`` logger was given a level: an application that calls
``logging.basicConfig(level=logging.INFO)`` sees one line from the ``dal.catalog`` logger when a catalog is
created or upgraded, and nothing otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, Engine, inspect, text

from dal.catalog.errors import CatalogOutOfDate
from dal.catalog.revision import HEAD as HEAD
from dal.catalog.revision import VERSION_TABLE as VERSION_TABLE

if TYPE_CHECKING:
    from alembic.config import Config

UPGRADE_COMMAND = "dal db upgrade"
# arbitrary constant key for pg_advisory_xact_lock, so concurrent first uses migrate once
_PG_LOCK_KEY = 0x0DA1CA7A
# a child of dal's logger: ``logging.getLogger("dal")`` settings apply (the catalog never imports dal itself)
_log = logging.getLogger("dal.catalog")


@contextmanager
def _quiet_alembic() -> Iterator[None]:
    """Alembic's INFO lines held back while dal migrates (warnings still pass), unless the application set the
    ``alembic`` logger's level itself: then it asked for them."""
    logger = logging.getLogger("alembic")
    if logger.level != logging.NOTSET:
        yield
        return
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(logging.NOTSET)


def _where(connection: Connection) -> str:
    from dal.catalog.engine import display_url

    return display_url(connection.engine.url)


def script_location() -> str:
    """The alembic script directory, inside this package (``dal/catalog/_alembic``), in a checkout as in a wheel."""
    return str(Path(__file__).resolve().parent / "_alembic")


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The revision this dal's catalog schema is at (``HEAD``)."""
    return HEAD


def script_head() -> str:
    """The head of the shipped alembic scripts (imports alembic; ``HEAD`` must equal it)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "no migrations shipped"
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision recorded in the catalog (None when it was never migrated): a plain query, no alembic."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()  # noqa: S608
    return str(rows[0]) if len(rows) == 1 else None


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
    # SQLite: BEGIN IMMEDIATE (see upgrade) already serialises writers


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the catalog to ``revision``; return (revision before, revision after)."""
    # dal_write: SQLite begins with BEGIN IMMEDIATE (a deferred reader that later writes fails at once in WAL mode)
    from alembic import command

    with engine.execution_options(dal_write=True).begin() as conn:
        _lock(conn)
        before = current_revision(conn)
        with _quiet_alembic():
            command.upgrade(_config(conn), revision)
        after = current_revision(conn)
    assert after is not None
    if before != after:
        _log.info("upgraded the catalog %s from revision %s to %s", _where(conn), before or "none", after)
    return before, after


def ensure_current(engine: Engine) -> None:
    """Create the catalog on first use; refuse an out-of-date or newer catalog with the command to run.

    Raises:
        CatalogOutOfDate: the database holds an older (or unknown, newer) catalog revision.
    """
    head = head_revision()
    with engine.connect() as conn:
        if current_revision(conn) == head:
            return  # the common case: no lock taken
    # decide under the migration lock: otherwise a process could read "no revision" before another
    # commits its first-use migration and then see that migration's tables (seen on PostgreSQL)
    with engine.execution_options(dal_write=True).begin() as conn:
        _lock(conn)
        current = current_revision(conn)
        if current == head:
            return
        tables = {t for t in inspect(conn).get_table_names() if t.startswith("dal_")} - {VERSION_TABLE}
        if current is None and not tables:
            from alembic import command

            with _quiet_alembic():
                command.upgrade(_config(conn), "head")
            _log.info("created the catalog %s (schema revision %s)", _where(conn), head)
            return
    from alembic.script import ScriptDirectory

    known = {s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions()}
    if current is not None and current not in known:
        raise CatalogOutOfDate(
            f"the catalog is at revision {current}, which this dal does not know (it is newer); upgrade dal"
        )
    raise CatalogOutOfDate(
        f"the catalog is at revision {current or 'none'} but this dal needs {head}; run `{UPGRADE_COMMAND}`"
    )
