"""NaN rows in row groups whose other values are all equal survive every filter that keeps them.

Parquet statistics leave NaN out of min/max, and when a row group's min equals its max pyarrow substitutes
that value for the column in the whole filter (``is_nan`` terms included): a group of [NaN, 1, 1] was
pruned from ``x <> 1`` and ``NOT x < 5`` (both true for NaN under IEEE 754), silently, in to_arrow,
count, shard and to_torch. Scans now get a widened filter (``dal.expr.pushdown``) and the exact filter
is applied to the rows they return.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import col
from dal.catalog import Catalog

# row groups of 3 rows: [NaN, 1, 1], [2, NaN, 2], [3, 4, NULL], [NaN, NaN, 5]; x32 the same as float32
X = [math.nan, 1.0, 1.0, 2.0, math.nan, 2.0, 3.0, 4.0, None, math.nan, math.nan, 5.0]
GROUP = 3


def table() -> pa.Table:
    return pa.table(
        {
            "k": pa.array(range(len(X)), pa.int64()),
            "x": pa.array(X, pa.float64()),
            "x32": pa.array(X, pa.float32()),
            "s": pa.array(["a", "b", "a"] * (len(X) // GROUP)),
        }
    )


def expected(keep: Any) -> list[int]:
    """The ids whose x satisfies ``keep`` (NULL rows never match)."""
    return [k for k, x in enumerate(X) if x is not None and keep(x)]


CASES = [
    ("x <> 1", col("x") != 1, expected(lambda x: math.isnan(x) or x != 1)),
    ("NOT x < 5", ~(col("x") < 5), expected(lambda x: not x < 5)),
    ("NOT (x <= 2)", ~(col("x") <= 2), expected(lambda x: not x <= 2)),
    ("x32 <> 2", col("x32") != 2, expected(lambda x: math.isnan(x) or x != 2)),
    ("NOT x IN (1, 2)", ~col("x").isin([1, 2]), expected(lambda x: math.isnan(x) or x not in (1, 2))),
    ("x <> 1 AND s = 'a'", (col("x") != 1) & (col("s") == "a"), None),
    ("x < 1.5 OR x <> 1", (col("x") < 1.5) | (col("x") != 1), expected(lambda x: True)),
]


@pytest.fixture(params=["parquet", "delta"])
def nan_ds(request: pytest.FixtureRequest, sqlite_env: Catalog, tmp_path: Path) -> dal.Dataset:
    data = table()
    if request.param == "parquet":
        (tmp_path / "p").mkdir()
        pq.write_table(data, tmp_path / "p" / "f.parquet", row_group_size=GROUP)
        dal.register("nan.parquet", str(tmp_path / "p"), format="parquet")
        ds = dal.open("nan.parquet")
    else:  # one file (one row group) per commit
        for start in range(0, len(X), GROUP):
            dal.write(data.slice(start, GROUP), "nan.delta", path=str(tmp_path / "d"))
        ds = dal.open("nan.delta")
    tasks = ds.scan().plan()
    assert len(tasks) == len(X) // GROUP  # every case below meets row groups with min == max and NaN
    return ds


def ids(scan: dal.Scan) -> list[int]:
    return sorted(scan.select("k").to_arrow().column("k").to_pylist())


@pytest.mark.parametrize(("sql", "tree", "want"), CASES, ids=[c[0] for c in CASES])
def test_nan_rows_survive_statistics(nan_ds: dal.Dataset, sql: str, tree: Any, want: list[int] | None) -> None:
    if want is None:  # x <> 1 AND s = 'a'
        want = [k for k in expected(lambda x: math.isnan(x) or x != 1) if k % GROUP != 1]
    assert want, "a case that selects nothing proves little"
    for flt in (sql, tree):
        scan = nan_ds.filter(flt)
        assert ids(scan) == want, flt
        assert sorted(scan.to_arrow().column("k").to_pylist()) == want, flt  # no projection
        assert scan.count() == len(want), flt
        assert scan.select("k").count() == len(want), flt
        for world in (2, 3):
            kept = [ids(scan.shard(r, world, "keep")) for r in range(world)]
            assert sorted(k for part in kept for k in part) == want, (flt, world)
            assert sum(scan.shard(r, world, "keep").count() for r in range(world)) == len(want)
        assert sorted(k for i in range(2) for k in ids_of_split(scan, i, 2)) == want, flt


def ids_of_split(scan: dal.Scan, index: int, parts: int) -> list[int]:
    tasks = scan.select("k").split(index, parts)
    return [k for b in scan.select("k").iter_batches(4, tasks=tasks) for k in b.column("k").to_pylist()]


@pytest.mark.parametrize(("sql", "tree", "want"), CASES[:2], ids=[c[0] for c in CASES[:2]])
def test_nan_rows_reach_torch(nan_ds: dal.Dataset, sql: str, tree: Any, want: list[int]) -> None:
    pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there
    seen = []
    for rank in range(2):
        data = nan_ds.filter(sql).select("k").shard(rank, 2, "keep").to_torch(batch_size=2)
        batches = list(data)
        assert data.num_batches() == len(batches)
        seen += [int(k) for b in batches for k in b["k"]]
    assert sorted(seen) == want


def test_no_float_filter_is_not_widened(nan_ds: dal.Dataset) -> None:
    """The common path: without a float comparison the scan filter is the exact one, applied once."""
    query = nan_ds.filter("k >= 2 AND s = 'a'").query
    assert query.exact_filter is None
    assert query.scan_filter is query.row_filter
    assert nan_ds.filter("x <> 1").query.exact_filter is not None


@pytest.mark.spark
def test_nan_rows_reach_sharded_spark(sqlite_env: Catalog, tmp_path: Path, spark: Any) -> None:
    """A sharded scan is read by Spark's executors with pyarrow (``read_tasks``): the same widened filter
    there, then the exact one on the rows read."""
    (tmp_path / "p").mkdir()
    pq.write_table(table(), tmp_path / "p" / "f.parquet", row_group_size=GROUP)
    dal.register("nan.spark", str(tmp_path / "p"), format="parquet")
    ds = dal.open("nan.spark")
    for sql, _, want in CASES[:2]:
        got = [r["k"] for rank in range(2) for r in ds.filter(sql).shard(rank, 2, "keep").to_spark(spark).collect()]
        assert sorted(got) == want, sql
