"""A null partition value round-trips through every format and the catalog, and stays apart from the
strings that spell null tokens (``__null__``, ``__HIVE_DEFAULT_PARTITION__``) and from values with ``/``, ``=``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import dal
from dal.catalog import Catalog
from dal.catalog.types import partition_key
from dal.tensors.schema import TensorField, TensorSchema

VALUES = [None, "__null__", "__HIVE_DEFAULT_PARTITION__", "a/b=c", "50%", "x"]
SCHEMA = TensorSchema("S", [TensorField("id", np.int64, ()), TensorField("p", np.str_, (), nullable=True)])


def _check(cat: Catalog, name: str, values: list[str | None]) -> None:
    ds = dal.open(name)
    got = {r["id"]: r["p"] for r in ds.to_arrow().to_pylist()}
    assert got == dict(enumerate(values))
    assert ds.filter("p IS NULL").to_arrow().column("id").to_pylist() == [0]
    partitions = cat.partitions(name)
    assert {p.values: p.row_count for p in partitions} == {(("p", v),): 1 for v in values}
    assert len({p.key for p in partitions}) == len(values)


@pytest.mark.parametrize("format", ["delta", "petastorm"])
def test_null_and_token_like_partition_values_round_trip(sqlite_env: Catalog, format: str) -> None:
    # delta-rs itself reads a partition value spelled like Hive's null token back as null: not dal's to change
    values = [v for v in VALUES if format != "delta" or v != "__HIVE_DEFAULT_PARTITION__"]
    data = {"id": list(range(len(values))), "p": values}
    if format == "delta":
        dal.write(pa.table(data), "nulls.delta", partition_by=["p"])
    else:
        dal.write(data, "nulls.petastorm", format="petastorm", schema=SCHEMA, partition_by=["p"])
    _check(sqlite_env, f"nulls.{format}", values)


def test_parquet_written_by_pyarrow_with_a_null_partition(sqlite_env: Catalog, tmp_path: Path) -> None:
    # pyarrow writes null as Hive's token (and cannot tell a string spelled like it apart): null only here
    table = pa.table({"id": [0, 1, 2], "p": [None, "__null__", "x"]})
    pads.write_dataset(table, tmp_path / "pq", format="parquet", partitioning=["p"], partitioning_flavor="hive")
    dal.register("nulls.parquet", str(tmp_path / "pq"), format="parquet")
    ds = dal.open("nulls.parquet")
    got = {r["id"]: r["p"] for r in ds.to_arrow().to_pylist()}
    assert got == {0: None, 1: "__null__", 2: "x"}
    assert ds.filter("p IS NULL").to_arrow().column("id").to_pylist() == [0]


def test_partition_keys_are_distinct_for_distinct_values() -> None:
    keys = {partition_key((("p", v),)) for v in VALUES}
    assert len(keys) == len(VALUES)
    assert partition_key((("date", "2026-01-01"), ("hour", None))) == "date=2026-01-01/hour=__HIVE_DEFAULT_PARTITION__"


def _blank_and_null_share_a_directory(cat: Catalog, name: str) -> None:
    import deltalake

    ds = dal.open(name)
    assert {r["id"]: r["p"] for r in ds.to_arrow().to_pylist()} == {0: "a", 1: None, 2: None}
    reference = deltalake.DeltaTable(ds.location).to_pyarrow_table().to_pylist()  # delta-rs reads '' as null
    assert {r["id"]: r["p"] for r in reference} == {0: "a", 1: None, 2: None}
    assert sorted(p.name for p in Path(ds.location).iterdir() if p.name.startswith("p=")) == [
        "p=__HIVE_DEFAULT_PARTITION__",
        "p=a",
    ]  # no p= directory, which Hive never reads (issue 23, item 11)
    assert {p.values: p.row_count for p in cat.partitions(name)} == {(("p", "a"),): 1, (("p", None),): 2}


def test_an_empty_partition_value_is_written_where_nulls_go(sqlite_env: Catalog) -> None:
    dal.write(pa.table({"id": [0, 1, 2], "p": ["a", "", None]}), "blank.delta", partition_by=["p"])
    _blank_and_null_share_a_directory(sqlite_env, "blank.delta")


@pytest.mark.spark
def test_an_empty_partition_value_from_spark_is_written_where_nulls_go(sqlite_env: Catalog, spark: object) -> None:
    df = spark.createDataFrame([(0, "a"), (1, ""), (2, None)], "id long, p string")  # type: ignore[attr-defined]
    dal.write(df, "blank.spark", partition_by=["p"])
    _blank_and_null_share_a_directory(sqlite_env, "blank.spark")
