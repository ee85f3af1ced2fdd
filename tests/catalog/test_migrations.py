"""Migrations: created on first use, out-of-date catalogs refused with the command to run, models == migrations."""

from __future__ import annotations

import json
import logging

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner

from dal.catalog import Catalog, CatalogOutOfDate, migrate
from dal.catalog.engine import make_engine
from dal.catalog.models import Base
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


def test_alembic_is_quiet_unless_migrating(catalog_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """``logging.basicConfig(level=logging.INFO)`` in an application: creating a catalog is one line from dal (not
    alembic's 12: plugin set-up, context, one per script), opening it again is none, and an upgrade is one line."""
    caplog.set_level(logging.INFO)
    Catalog(catalog_url).close()
    assert [r.name for r in caplog.records if r.name.startswith("alembic")] == []
    mine = [r.getMessage() for r in caplog.records if r.name == "dal.catalog"]
    assert len(mine) == 1 and mine[0].startswith("created the catalog ") and f"revision {migrate.HEAD}" in mine[0]
    assert logging.getLogger("alembic").level == logging.NOTSET  # put back as it was
    caplog.clear()
    cat = Catalog(catalog_url)
    cat.list_datasets()
    cat.close()
    assert [r for r in caplog.records if r.name.startswith(("alembic", "dal"))] == []


def test_an_upgrade_logs_one_line_and_alembic_only_when_asked(
    catalog_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _upgrade_to(catalog_url, "0001")
    caplog.set_level(logging.INFO)
    caplog.clear()
    Catalog(catalog_url, create=False).upgrade()
    assert [r.name for r in caplog.records if r.name.startswith("alembic")] == []
    mine = [r.getMessage() for r in caplog.records if r.name == "dal.catalog"]
    assert len(mine) == 1 and mine[0].startswith("upgraded the catalog ")
    assert mine[0].endswith(f" from revision 0001 to {migrate.HEAD}")
    engine = make_engine(catalog_url)
    with engine.begin() as conn:
        command.downgrade(migrate._config(conn), "0001")
    engine.dispose()
    caplog.clear()
    logging.getLogger("alembic").setLevel(logging.INFO)  # the application asked for alembic's lines
    try:
        Catalog(catalog_url, create=False).upgrade()
    finally:
        logging.getLogger("alembic").setLevel(logging.NOTSET)
    assert any(r.name.startswith("alembic") and "Running upgrade" in r.getMessage() for r in caplog.records)


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
    assert f"from revision 0001 to {migrate.HEAD}" in result.output
    result = CliRunner().invoke(cli, ["--catalog", catalog_url, "db", "upgrade"])
    assert f"up to date (revision {migrate.HEAD})" in result.output
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


def test_head_constant_is_the_scripts_head() -> None:
    """``migrate.HEAD`` (what an up-to-date catalog is checked against without alembic) is alembic's head."""
    assert migrate.HEAD == migrate.script_head()


def test_current_catalog_is_opened_without_alembic(catalog_url: str) -> None:
    """Opening an up-to-date catalog reads its revision with a plain query: alembic is not even imported."""
    import subprocess
    import sys

    Catalog(catalog_url).close()
    code = (
        "import sys; from dal.catalog import Catalog; c = Catalog(sys.argv[1]); c.list_datasets(); "
        "print(sorted(m for m in sys.modules if m == 'alembic' or m.startswith(('alembic.', 'mako'))))"
    )
    out = subprocess.run([sys.executable, "-c", code, catalog_url], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def _insert_version(conn: sa.Connection, ds_id: int, number: int, at: str, properties: dict[str, object]) -> None:
    conn.execute(
        sa.text(
            "INSERT INTO dal_versions (dataset_id, number, created_at, recorded_at, operation, row_count, "
            "file_count, size_bytes, schema_id, partition_columns, properties) VALUES (:d, :n, :t, :t, 'append', "
            "1, 1, 1, :d, '[]', :p)"
        ),
        {"d": ds_id, "n": number, "t": at, "p": json.dumps(properties)},
    )


def test_upgrade_from_0002_backfills_edges_from_recorded_lineage(catalog_url: str) -> None:
    """Lineage records stored in version properties (by dal before 0003) become inferred edges; each recorded
    name goes to the dataset that held it when the version was written (renames and a reused name)."""
    _upgrade_to(catalog_url, "0002")
    engine = make_engine(catalog_url)
    renamed_at = "2026-03-01T00:00:00+00:00"
    with engine.begin() as conn:
        for i, (name, props) in enumerate(
            [
                # "src.a" was renamed to "src.b" on March 1st; a new dataset took the name "src.a" later
                ("src.b", {"former_names": [{"name": "src.a", "until": renamed_at}]}),
                ("src.a", {}),
                ("out.x", {}),
            ],
            start=1,
        ):
            conn.execute(
                sa.text(
                    "INSERT INTO dal_datasets (id, name, format, location, description, owner, current_version, "
                    "properties, created_at, updated_at) VALUES (:i, :n, 'delta', :l, '', 'me', 3, :p, :t, :t)"
                ),
                {"i": i, "n": name, "l": f"/data/{i}", "p": json.dumps(props), "t": "2026-01-01 00:00:00"},
            )
            conn.execute(
                sa.text("INSERT INTO dal_schemas (id, dataset_id, fingerprint) VALUES (:i, :i, :f)"),
                {"i": i, "f": f"{i:064x}"},
            )
        for n in range(2):
            _insert_version(conn, 1, n, "2026-01-01 00:00:00", {})
            _insert_version(conn, 2, n, "2026-04-01 00:00:00", {})

        def record(*upstream: dict[str, object]) -> dict[str, object]:
            return {"lineage": {"user": "u", "time": "t", "upstream": list(upstream)}}

        old_a = {"dataset": "src.a", "version": 1, "filters": None}
        _insert_version(conn, 3, 0, "2026-02-01 00:00:00", record(old_a, old_a))  # before the rename: src.b
        _insert_version(conn, 3, 1, "2026-05-01 00:00:00", record({**old_a, "filters": "id > 2"}))  # the new src.a
        _insert_version(conn, 3, 2, "2026-05-02 00:00:00", record({"dataset": "gone.z", "version": 4}))  # dropped
        _insert_version(conn, 3, 3, "2026-05-03 00:00:00", {"unavailable": "upstream mentioned in text only"})
    engine.dispose()

    before, after = Catalog(catalog_url, create=False).upgrade()
    assert (before, after) == ("0002", migrate.HEAD)
    cat = Catalog(catalog_url)
    edges = {n: [(e.upstream, e.upstream_version, e.filters, e.how, e.recorded_as) for e in cat.upstream("out.x", n)]
             for n in range(4)}  # fmt: skip
    assert edges == {
        0: [("src.b", 1, None, "inferred", "src.a")],  # repeated entry recorded once
        1: [("src.a", 1, "id > 2", "inferred", None)],
        2: [("gone.z", 4, None, "inferred", None)],
        3: [],
    }
    assert [(e.dataset, e.version) for e in cat.downstream("src.b", 1)] == [("out.x", 0)]
    assert [(e.dataset, e.version) for e in cat.downstream("src.a", 1)] == [("out.x", 1)]
    assert cat.downstream("src.a", 0) == [] and cat.downstream("src.b", 0) == []
