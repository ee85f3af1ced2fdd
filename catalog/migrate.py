"""Create and upgrade the catalog schema with the alembic scripts shipped beside this package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text

from catalog.errors import CatalogOutOfDate

VERSION_TABLE = "dal_alembic_version"
UPGRADE_COMMAND = "dal db upgrade"
# arbitrary constant key for pg_advisory_xact_lock, so concurrent first uses migrate once
_PG_LOCK_KEY = 0x0DA1CA7A


def script_location() -> str:
    """The alembic script directory: packaged in a wheel, or the repository's top-level ``alembic/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "_alembic"
    if (packaged / "env.py").is_file():
        return str(packaged)
    return str(here.parent / "alembic")


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "no migrations shipped"
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
    # SQLite: BEGIN IMMEDIATE (see upgrade) already serialises writers


def upgrade(engine: Engine, revision: str = "head") -> tuple[str | None, str]:
    """Upgrade the catalog to ``revision``; return (revision before, revision after)."""
    # dal_write: SQLite begins with BEGIN IMMEDIATE (a deferred reader that later writes fails at once in WAL mode)
    with engine.execution_options(dal_write=True).begin() as conn:
        _lock(conn)
        before = current_revision(conn)
        command.upgrade(_config(conn), revision)
        after = current_revision(conn)
    assert after is not None
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
            command.upgrade(_config(conn), "head")
            return
    known = {s.revision for s in ScriptDirectory.from_config(_config()).walk_revisions()}
    if current is not None and current not in known:
        raise CatalogOutOfDate(
            f"the catalog is at revision {current}, which this dal does not know (it is newer); upgrade dal"
        )
    raise CatalogOutOfDate(
        f"the catalog is at revision {current or 'none'} but this dal needs {head}; run `{UPGRADE_COMMAND}`"
    )
