"""Adopting Delta tables written by other tools, and picking up their later commits."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import dal
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DatasetExists, FormatError, SchemaMismatch


def batch(start: int, n: int, region: str = "eu") -> pa.Table:
    return pa.table({"region": [region] * n, "id": list(range(start, start + n)), "v": [1.5] * n})


@pytest.fixture
def foreign(tmp_path: Path) -> str:
    """A table written by delta-rs directly, outside dal: create, append, overwrite, schema merge."""
    where = str(tmp_path / "foreign_table")
    deltalake.write_deltalake(where, batch(0, 5), partition_by=["region"])
    deltalake.write_deltalake(where, batch(5, 3, "us"), mode="append")
    deltalake.write_deltalake(where, batch(100, 2), mode="overwrite")
    deltalake.write_deltalake(
        where, batch(200, 1).append_column("w", pa.array([7])), mode="append", schema_mode="merge"
    )
    return where


def test_register_adopts_every_version(cat: Catalog, foreign: str) -> None:
    versions = dal.register("ext.table", foreign, description="from elsewhere")
    assert [(v.number, v.storage_version, v.operation, v.row_count) for v in versions] == [
        (0, 0, "create", 5),
        (1, 1, "append", 8),
        (2, 2, "overwrite", 2),
        (3, 3, "schema-change", 3),
    ]
    assert [p.key for p in cat.partitions("ext.table", 1)] == ["region=eu", "region=us"]
    assert set(versions[3].schema.names) == {"region", "id", "v", "w"}
    for v in versions:  # each catalog version reads exactly its Delta version
        expected = deltalake.DeltaTable(foreign, version=v.storage_version).to_pyarrow_table()
        got = dal.open("ext.table", v.number).to_arrow()
        assert sorted(got.column("id").to_pylist()) == sorted(expected.column("id").to_pylist())
        assert got.column_names == expected.column_names


def test_sync_picks_up_later_commits(cat: Catalog, foreign: str) -> None:
    dal.register("ext.sync", foreign)
    assert dal.sync("ext.sync") == []
    deltalake.write_deltalake(foreign, batch(300, 4).append_column("w", pa.array([1] * 4)), mode="append")
    deltalake.DeltaTable(foreign).delete("id = 300")
    new = dal.sync("ext.sync")
    assert [(v.number, v.storage_version, v.operation) for v in new] == [(4, 4, "append"), (5, 5, "delete")]
    assert sorted(dal.open("ext.sync", 5).to_arrow().column("id").to_pylist()) == [100, 101, 200, 301, 302, 303]
    # a dal write after foreign commits records those too, in order
    deltalake.write_deltalake(foreign, batch(400, 1).append_column("w", pa.array([1])), mode="append")
    mine = dal.write(batch(500, 1).append_column("w", pa.array([2])), "ext.sync")
    assert [v.storage_version for v in cat.versions("ext.sync")] == list(range(8))
    assert mine.storage_version == 7 and mine.number == 7


def test_cli_register_and_sync(cat: Catalog, foreign: str, catalog_url: str) -> None:
    run = CliRunner()
    r = run.invoke(cli, ["--catalog", catalog_url, "register", "ext.cli", foreign, "--json"])
    assert r.exit_code == 0, r.output
    assert [v["version"] for v in json.loads(r.stdout)] == [0, 1, 2, 3]
    deltalake.write_deltalake(foreign, batch(9, 1).append_column("w", pa.array([1])), mode="append")
    r = run.invoke(cli, ["--catalog", catalog_url, "sync", "ext.cli"])
    assert r.exit_code == 0 and "recorded 1 new version(s) (4..4)" in r.stdout
    r = run.invoke(cli, ["--catalog", catalog_url, "sync", "ext.cli"])
    assert "up to date" in r.stdout
    r = run.invoke(cli, ["--catalog", catalog_url, "register", "ext.cli", foreign])
    assert r.exit_code == 1 and "exists already" in r.stderr


def test_register_refuses_what_is_not_a_delta_table(cat: Catalog, tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    pq.write_table(batch(0, 2), tmp_path / "plain" / "x.parquet")
    with pytest.raises(FormatError, match="no delta table at"):
        dal.register("not.delta", str(tmp_path / "plain"))
    with pytest.raises(FormatError, match="no delta table at"):
        dal.register("not.there", str(tmp_path / "missing"))
    assert cat.list_datasets() == []


def test_register_twice_and_bad_time_column(cat: Catalog, foreign: str) -> None:
    dal.register("ext.once", foreign)
    with pytest.raises(DatasetExists):
        dal.register("ext.once", foreign)
    with pytest.raises(DatasetExists, match="location of dataset 'ext.once'"):  # one writable entry per location
        dal.register("ext.twice", foreign)
    with pytest.raises(DatasetExists, match="location of dataset 'ext.once'"):  # read-only too: one location, one
        dal.register("ext.twice", foreign, read_only=True)  # dataset
    dal.lifecycle.drop("ext.once")
    with pytest.raises(SchemaMismatch, match="time_column 'when'"):
        dal.register("ext.twice", foreign, time_column="when", read_only=True)
    assert cat.list_datasets() == []  # the failed register left nothing


def test_credentials_in_a_location_are_refused(cat: Catalog) -> None:
    with pytest.raises(dal.DalError, match="contains credentials"):
        dal.register("ext.creds", "s3://AKIAEXAMPLE:secret@bucket/table")
    with pytest.raises(dal.DalError, match="contains credentials"):
        dal.write(batch(0, 1), "ext.creds", path="s3://AKIAEXAMPLE:secret@bucket/table")
    assert cat.list_datasets() == []
