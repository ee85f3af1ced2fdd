"""Migrations: created on first use, out-of-date catalogs refused with the command to run, models == migrations."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner

from catalog import Catalog, CatalogOutOfDate, migrate
from catalog.engine import make_engine
from catalog.models import Base
from dal.cli.app import cli


def _upgrade_to(url: str, revision: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        command.upgrade(migrate._config(conn), revision)
    engine.dispose()


def test_first_use_creates_the_catalog(catalog_url: str) -> None:
    cat = Catalog(catalog_url)
    assert cat.revision() == migrate.head_revision()
    assert cat.list_datasets() == []


def test_models_match_migrations(catalog_url: str) -> None:
    """The ORM models and the alembic scripts describe the same schema (no pending autogenerate diff)."""
    Catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    with engine.connect() as conn:
        mc = MigrationContext.configure(conn, opts={"version_table": migrate.VERSION_TABLE, "compare_type": False})
        assert compare_metadata(mc, Base.metadata) == []


def test_out_of_date_catalog_is_refused_then_upgraded(catalog_url: str) -> None:
    _upgrade_to(catalog_url, "0001")
    with pytest.raises(CatalogOutOfDate, match="run `dal db upgrade`"):
        Catalog(catalog_url)
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "ls"])
    assert result.exit_code == 1
    assert "dal db upgrade" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert "from revision 0001 to 0002" in result.output
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "db", "upgrade"])
    assert "up to date (revision 0002)" in result.output
    assert Catalog(catalog_url).list_datasets() == []


def test_newer_catalog_is_refused(catalog_url: str) -> None:
    Catalog(catalog_url).close()
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '9999'"))
    with pytest.raises(CatalogOutOfDate, match="newer"):
        Catalog(catalog_url)


def test_downgrade_and_upgrade_round_trip(catalog_url: str) -> None:
    Catalog(catalog_url).close()
    _upgrade_to(catalog_url, "head")
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        command.downgrade(migrate._config(conn), "base")
    with engine.connect() as conn:
        assert not [
            t for t in sa.inspect(conn).get_table_names() if t.startswith("dal_") and t != migrate.VERSION_TABLE
        ]
    assert Catalog(catalog_url).revision() == migrate.head_revision()  # empty again = first use
