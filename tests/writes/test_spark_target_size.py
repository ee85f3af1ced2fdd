"""Spark writes aim at a file size when asked: with ``target_file_size`` a DataFrame of 200 tiny partitions becomes
a few files, not 200 (coalesced by Spark's size estimate before staging), a smaller target gives more files, and
every row is written exactly once; without it the DataFrame's partitioning is kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def data_files(cat: Catalog, name: str) -> list[Path]:
    root = Path(cat.get_dataset(name).location)
    return [p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts]


def tiny_partitions(spark: Any) -> Any:
    df = spark.range(0, 400, numPartitions=200).selectExpr("id", "id * 2 AS twice", "CAST(id % 7 AS STRING) AS k")
    assert df.rdd.getNumPartitions() == 200
    return df


def test_two_hundred_tiny_partitions_become_few_files_every_row_once(sqlite_env: Catalog, spark: Any) -> None:
    dal.write(tiny_partitions(spark), "ts.default", target_file_size=128 * 1024 * 1024)
    assert 1 <= len(data_files(sqlite_env, "ts.default")) <= 2
    got = dal.open("ts.default").to_arrow().sort_by("id").to_pydict()
    assert got["id"] == list(range(400)) and got["twice"] == [2 * i for i in range(400)]

    dal.write(tiny_partitions(spark), "ts.small", target_file_size=256)
    files = len(data_files(sqlite_env, "ts.small"))
    assert 2 < files <= 200
    got = dal.open("ts.small").to_arrow().sort_by("id").to_pydict()
    assert got["id"] == list(range(400)) and got["k"] == [str(i % 7) for i in range(400)]


def test_partitioned_write_keeps_partitions(sqlite_env: Catalog, spark: Any) -> None:
    dal.write(tiny_partitions(spark), "ts.part", partition_by=["k"], target_file_size=128 * 1024 * 1024)
    files = data_files(sqlite_env, "ts.part")
    assert {p.parent.name for p in files} == {f"k={i}" for i in range(7)} and len(files) <= 14
    assert sorted(dal.open("ts.part").to_arrow()["id"].to_pylist()) == list(range(400))


def test_without_a_target_the_partitioning_is_kept(sqlite_env: Catalog, spark: Any) -> None:
    """Not asked, dal does not coalesce: a coalesce narrows the work upstream of the write too, and Spark's size
    estimate can be far below the real size (decision in docs/writing.md)."""
    df = spark.range(0, 40, numPartitions=4).selectExpr("id")
    dal.write(df, "ts.kept")
    assert len(data_files(sqlite_env, "ts.kept")) == 4
    assert sorted(dal.open("ts.kept").to_arrow()["id"].to_pylist()) == list(range(40))


def test_target_file_size_is_checked_before_anything_is_written(sqlite_env: Catalog, spark: Any) -> None:
    for bad in (0, -1, "128MB", True, 1.5):
        with pytest.raises(DalError, match="target_file_size"):
            dal.write(tiny_partitions(spark), "ts.bad", target_file_size=bad)  # type: ignore[arg-type]
    assert not sqlite_env.list_datasets()
