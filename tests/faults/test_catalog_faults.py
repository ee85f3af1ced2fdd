"""A catalog that may not be written: refused before storage is touched; a catalog that fails after the
storage commit: CommittedNotRecorded, and ``dal sync`` records the commit exactly once."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
import sqlalchemy as sa

import dal
import dal.api
import dal.writes.commit
from dal.catalog import Catalog, CatalogReadOnly, CommittedNotRecorded
from tests.conftest import use_catalog
from tests.faults.conftest import fill


def table(start: int, n: int) -> pa.Table:
    return pa.table({"id": list(range(start, start + n))})


def ids(name: str, catalog: str | None = None) -> list[int]:
    return sorted(dal.open(name, catalog=catalog).to_arrow().column("id").to_pylist())


@pytest.fixture
def reader_url(pg_url: str, pg_server: str) -> Iterator[str]:
    """A real PostgreSQL role that may only SELECT from the catalog schema of ``pg_url``."""
    Catalog(pg_url)  # create the catalog tables as the owner
    schema = pg_url.rsplit("search_path%3D", 1)[1]
    role = f"dal_reader_{uuid.uuid4().hex[:8]}"
    eng = sa.create_engine(pg_server)
    with eng.begin() as c:
        c.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        c.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        c.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
    base = sa.make_url(pg_server).set(username=role)
    yield f"{base.render_as_string(hide_password=False)}?options=-csearch_path%3D{schema}"
    dal.api._catalogs.clear()
    with eng.begin() as c:
        c.execute(sa.text(f'DROP OWNED BY "{role}"'))
        c.execute(sa.text(f'DROP ROLE "{role}"'))
    eng.dispose()


@pytest.mark.postgres
def test_select_only_role_is_refused_before_anything_is_written(
    pg_url: str, reader_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_catalog(pg_url, tmp_path, monkeypatch)
    first = dal.write(table(0, 3), "roles.ds")
    location = dal.open("roles.ds").info.location

    with pytest.raises(
        CatalogReadOnly, match=r"this catalog role \(dal_reader_\w+\) cannot write.*INSERT on dal_versions"
    ):
        dal.write(table(3, 3), "roles.ds", catalog=reader_url)
    assert deltalake.DeltaTable(location).version() == first.storage_version  # no foreign commit left behind
    with pytest.raises(CatalogReadOnly):
        dal.write(table(0, 1), "roles.fresh", catalog=reader_url)
    assert not (tmp_path / "warehouse" / "roles" / "fresh").exists()

    assert ids("roles.ds", reader_url) == [0, 1, 2]  # the role reads
    v = dal.write(table(10, 1), "roles.ds")  # the next writer with rights records only its own rows
    assert v.number == 1 and v.storage_version == first.storage_version + 1
    assert ids("roles.ds") == [0, 1, 2, 10]


@pytest.mark.postgres
def test_direct_catalog_writes_by_a_select_only_role_say_read_only(pg_url: str, reader_url: str) -> None:
    reader = Catalog(reader_url)
    with pytest.raises(CatalogReadOnly, match="this catalog role cannot write"):
        reader.create_dataset("roles.x", format="delta", location="/nowhere")
    assert [d.name for d in reader.list_datasets()] == []


def test_read_only_sqlite_catalog_is_refused_before_anything_is_written(sqlite_env: Catalog, tmp_path: Path) -> None:
    first = dal.write(table(0, 3), "ro.ds")
    location = dal.open("ro.ds").info.location
    db = sa.make_url(sqlite_env.url).database
    read_only = f"sqlite:///file:{db}?mode=ro&uri=true"

    with pytest.raises(CatalogReadOnly, match="attempt to write a readonly database"):
        dal.write(table(3, 3), "ro.ds", catalog=read_only)
    assert deltalake.DeltaTable(location).version() == first.storage_version
    assert ids("ro.ds", read_only) == [0, 1, 2]
    assert dal.write(table(3, 1), "ro.ds").storage_version == first.storage_version + 1


def test_cli_changes_through_a_read_only_catalog_are_one_clear_line(sqlite_env: Catalog) -> None:
    from click.testing import CliRunner

    from dal.cli.app import cli

    dal.write(table(0, 3), "ro.ds")
    read_only = f"sqlite:///file:{sa.make_url(sqlite_env.url).database}?mode=ro&uri=true"
    for args in (["tag", "ro.ds", "0", "prod"], ["sync", "ro.ds"]):
        result = CliRunner().invoke(cli, args, env={"DAL_CATALOG_URL": read_only})
        if args[0] == "sync":  # nothing new to record: a read-only role may sync a dataset that is current
            assert result.exit_code == 0, result.output
            continue
        assert result.exit_code != 0
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dal: error: this catalog role cannot write"), result.output
    assert sqlite_env.tags("ro.ds") == {}


@pytest.mark.postgres
def test_privilege_lost_after_the_storage_commit_is_committed_not_recorded(
    pg_url: str, pg_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_catalog(pg_url, tmp_path, monkeypatch)
    schema = pg_url.rsplit("search_path%3D", 1)[1]
    role = f"dal_writer_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(pg_server)
    with admin.begin() as c:
        c.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        c.execute(sa.text(f'GRANT ALL ON SCHEMA "{schema}" TO "{role}"'))
        c.execute(sa.text(f'GRANT ALL ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
        c.execute(sa.text(f'GRANT ALL ON ALL SEQUENCES IN SCHEMA "{schema}" TO "{role}"'))
    writer_url = f"{sa.make_url(pg_server).set(username=role).render_as_string(hide_password=False)}?options=-csearch_path%3D{schema}"
    try:
        dal.write(table(0, 3), "lost.ds", catalog=writer_url)

        def revoke(point: str) -> None:  # the privilege goes away between the storage commit and the catalog
            if point == "after-storage-commit":
                with admin.begin() as c:
                    c.execute(sa.text(f'REVOKE INSERT, UPDATE ON ALL TABLES IN SCHEMA "{schema}" FROM "{role}"'))

        monkeypatch.setattr(dal.writes.commit, "pause", revoke)
        with pytest.raises(CommittedNotRecorded) as e:
            dal.write(table(3, 3), "lost.ds", catalog=writer_url)
        message = str(e.value)
        assert "committed to storage as delta version 1" in message and "dal sync lost.ds" in message
        assert "do NOT retry" in message and "permission denied" in message
        assert e.value.storage_version == 1
        assert [v.storage_version for v in dal.api.get_catalog().versions("lost.ds")] == [0]

        assert [v.storage_version for v in dal.sync("lost.ds")] == [1]  # with rights: recorded once
        assert dal.sync("lost.ds") == []
        assert ids("lost.ds") == list(range(6))
    finally:
        dal.api._catalogs.clear()
        with admin.begin() as c:
            c.execute(sa.text(f'DROP OWNED BY "{role}"'))
            c.execute(sa.text(f'DROP ROLE "{role}"'))
        admin.dispose()


def test_catalog_disk_full_after_the_storage_commit_is_committed_not_recorded(
    small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{small_disk}/catalog.db"
    cat = use_catalog(url, tmp_path, monkeypatch)
    dal.write(table(0, 3), "full.ds", description="x")
    fillers: list[Path] = []

    def fill_catalog_disk(point: str) -> None:
        if point == "after-storage-commit":
            fillers.append(fill(small_disk))

    monkeypatch.setattr(dal.writes.commit, "pause", fill_catalog_disk)
    big = pa.table({"id": list(range(3, 3 + 50_000))})
    with pytest.raises(
        CommittedNotRecorded, match=r"committed to storage as delta version 1 .*full.*dal sync full\.ds"
    ):
        dal.write(big, "full.ds", description="a long description " * 5000)
    for f in fillers:
        f.unlink()
    assert [v.storage_version for v in cat.versions("full.ds")] == [0]
    assert [v.storage_version for v in dal.sync("full.ds")] == [1]
    assert len(ids("full.ds")) == 3 + 50_000  # no duplicated rows
