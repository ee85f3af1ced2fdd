"""scan.to_polars / scan.to_duckdb against independent references: pandas and DuckDB reading the raw
Parquet files, and delta-rs for a table with deletion vectors (deleted rows must not come back)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import FilterError, MissingDependency
from tests.conformance.conftest import require_corpus
from tests.test_layers import uninstall


def _table() -> pa.Table:
    n = 600
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([i * 0.5 for i in range(n)], pa.float64()),
            "station": pa.array([["YUL", "YYZ", "YVR"][i % 3] for i in range(n)]),
            "day": pa.array([f"2026-01-0{1 + i % 4}" for i in range(n)]),
        }
    )


@pytest.fixture
def written(sqlite_env: Catalog, tmp_path: Path) -> Path:
    """A partitioned Petastorm-format dataset written in two versions; returns its location."""
    path = tmp_path / "ds"
    dal.write(_table().slice(0, 300), "t.ds", partition_by=["day"], path=str(path))
    dal.write(_table().slice(300), "t.ds", partition_by=["day"])
    return path


def _reference(path: Path) -> pa.Table:
    """Every row of the raw files, read by DuckDB with hive partitioning (dal is not involved)."""
    files = sorted(str(p) for p in path.rglob("*.parquet") if "/_" not in str(p.relative_to(path)))
    assert files
    options = "hive_partitioning=true, hive_types_autocast=false, union_by_name=true"
    return _table_of(_sql(f"select id, x, station, day from read_parquet({files!r}, {options})").arrow())


def _sql(query: str) -> duckdb.DuckDBPyRelation:
    relation = duckdb.sql(query)
    assert relation is not None
    return relation


def _table_of(result: pa.Table | pa.RecordBatchReader) -> pa.Table:
    return result.read_all() if isinstance(result, pa.RecordBatchReader) else result


def _sql_on(con: duckdb.DuckDBPyConnection, query: str) -> duckdb.DuckDBPyRelation:
    relation = con.sql(query)
    assert relation is not None
    return relation


def _rows(t: pa.Table, columns: list[str]) -> list[tuple[object, ...]]:
    d = t.select(columns).to_pydict()
    return sorted(zip(*(d[c] for c in columns), strict=True))


def test_polars_lazy_projection_filter_partition_match_the_raw_files(written: Path) -> None:
    ref = _reference(written).to_pandas()
    want = ref[(ref.station == "YUL") & (ref.x >= 100)][["id", "day"]]
    scan = dal.open("t.ds").scan().select("id", "day", "station", "x").filter("station = 'YUL'")
    lf = scan.to_polars()
    assert isinstance(lf, pl.LazyFrame)
    got = lf.filter(pl.col("x") >= 100).select("id", "day").collect()
    assert sorted(zip(got["id"].to_list(), got["day"].to_list(), strict=True)) == sorted(
        zip(want.id.tolist(), want.day.tolist(), strict=True)
    )
    assert got.height > 0
    eager = dal.open("t.ds").scan().select("id").to_polars(lazy=False)
    assert isinstance(eager, pl.DataFrame) and eager.columns == ["id"] and eager.height == len(ref)
    assert dal.open("t.ds").scan().to_polars().head(5).collect().height == 5
    assert dal.open("t.ds").scan().to_polars().select(pl.len()).collect().item() == len(ref)  # no column read


def test_polars_reads_the_pinned_version_only(written: Path) -> None:
    v0 = dal.open("t.ds", 0).scan().to_polars(lazy=False)
    assert sorted(v0["id"].to_list()) == list(range(300))


def test_duckdb_relation_and_named_view_match_the_raw_files(written: Path) -> None:
    ref = _reference(written)
    con = duckdb.connect()
    scan = dal.open("t.ds").scan().select("id", "station", "day").filter("day = '2026-01-02'")
    rel = scan.to_duckdb(con, "radar")
    assert rel.columns == ["id", "station", "day"]
    got = _table_of(_sql_on(con, "select id, station, day from radar where station <> 'YVR'").arrow())
    want = [r for r in _rows(ref, ["id", "station", "day"]) if r[2] == "2026-01-02" and r[1] != "YVR"]
    assert _rows(got, ["id", "station", "day"]) == want and want
    assert _sql_on(con, "select count(*) from radar").fetchall() == [
        (len(want) + sum(r[1] == "YVR" for r in _rows(ref, ["id", "station", "day"]) if r[2] == "2026-01-02"),)
    ]
    assert dal.open("t.ds", 0).scan().to_duckdb().aggregate("count(*)").fetchall() == [(300,)]
    with pytest.raises(FilterError, match="identifier"):
        scan.to_duckdb(con, "x; drop table t")


def test_deletion_vectors_do_not_come_back(sqlite_env: Catalog, tmp_path: Path) -> None:
    from deltalake import DeltaTable, QueryBuilder

    src = require_corpus() / "delta-rs" / "table-with-dv-small"
    shutil.copytree(src, tmp_path / "dv")
    delta = DeltaTable(str(tmp_path / "dv"))  # delta-rs's own reader applies the deletion vectors
    reference = pa.table(QueryBuilder().register("t", delta).execute("select value from t").read_all())
    want = sorted(reference.column("value").to_pylist())
    [(raw,)] = _sql(f"select count(*) from read_parquet('{tmp_path / 'dv'}/*.parquet')").fetchall()
    assert raw > len(want)  # the files still hold the deleted rows
    dal.register("t.dv", str(tmp_path / "dv"))
    scan = dal.open("t.dv").scan()
    assert sorted(scan.to_polars().collect()["value"].to_list()) == want
    rows = scan.to_duckdb().order("value").fetchall()
    assert [r[0] for r in rows] == want


@pytest.mark.parametrize(("module", "method"), [("polars", "to_polars"), ("duckdb", "to_duckdb")])
def test_missing_extra_names_the_pip_command(
    written: Path, monkeypatch: pytest.MonkeyPatch, module: str, method: str
) -> None:
    scan = dal.open("t.ds").scan()
    uninstall(monkeypatch, module)
    with pytest.raises(MissingDependency, match=rf"pip install 'dal-catalog\[{module}\]'"):
        getattr(scan, method)()


def test_commits_and_pruning_are_logged_under_the_dal_logger(
    sqlite_env: Catalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dal")
    dal.write(_table().slice(0, 300), "t.logged", partition_by=["day"], path=str(tmp_path / "ds"))
    dal.write(_table().slice(300), "t.logged")
    committed = [r.getMessage() for r in caplog.records if r.name == "dal" and r.getMessage().startswith("committed")]
    assert [m.split(" (")[0] for m in committed] == [
        "committed t.logged as version 0",
        "committed t.logged as version 1",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records if r.getMessage().startswith("committed"))
    caplog.clear()
    assert dal.open("t.logged", 0).scan().filter("day = '2026-01-02'").count() == 75
    assert "t.logged version 0: pruned 3 of 4 files, then 0 of 1 row groups" in caplog.messages
