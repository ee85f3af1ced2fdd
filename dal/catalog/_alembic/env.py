"""Alembic environment for the dal catalog.

dal runs migrations programmatically (``dal.catalog.migrate``) and hands over an open connection in
``config.attributes["connection"]``; the plain ``alembic`` command line works too, given
``-x url=...`` or ``sqlalchemy.url``.
"""

from alembic import context
from sqlalchemy import create_engine

from dal.catalog.migrate import VERSION_TABLE
from dal.catalog.models import Base

config = context.config


def _run(connection: object) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=True,  # SQLite needs batch mode for ALTER TABLE
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("alembic: pass the catalog URL with -x url=... (or use `dal db upgrade`)")
    with create_engine(url).begin() as conn:
        _run(conn)
