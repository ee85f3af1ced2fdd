"""Appending data without a nullable column of the dataset writes NULLs there, as Delta allows; a missing
NOT NULL column is still refused before anything is written."""

from __future__ import annotations

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import SchemaMismatch


def test_append_without_a_nullable_column(sqlite_env: Catalog) -> None:
    first = pa.table({"id": [1, 2], "city": ["a", "b"], "temp": [1.5, None], "day": ["d1", "d2"]})
    v0 = dal.write(first, "m.t", partition_by=["day"])
    v1 = dal.write(pa.table({"id": [3], "day": ["d1"]}), "m.t")  # no city, no temp
    v2 = dal.write(pa.table({"temp": [9.0], "id": [4], "day": ["d3"]}), "m.t")  # other order, no city
    assert v1.schema == v0.schema == v2.schema and v2.number == 2
    rows = sorted(dal.open("m.t").to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows[2:] == [
        {"id": 3, "city": None, "temp": None, "day": "d1"},
        {"id": 4, "city": None, "temp": 9.0, "day": "d3"},
    ]
    assert dal.open("m.t").filter("city IS NULL").count() == 2


def test_missing_partition_column_and_merge(sqlite_env: Catalog) -> None:
    dal.write(pa.table({"id": [1], "day": ["d1"]}), "m.p", partition_by=["day"])
    dal.write(pa.table({"id": [2], "extra": ["x"]}), "m.p", schema_mode="merge")  # no day, a new column
    got = sorted(dal.open("m.p").to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == [{"id": 1, "day": "d1", "extra": None}, {"id": 2, "day": None, "extra": "x"}]


def test_missing_not_null_column_is_refused(sqlite_env: Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("city", pa.string())])
    dal.write(pa.table({"id": [1], "city": ["a"]}, schema=schema), "m.n")
    with pytest.raises(SchemaMismatch, match=r"not nullable in the table\): id"):
        dal.write(pa.table({"city": ["b"]}), "m.n")
    assert [v.number for v in sqlite_env.versions("m.n")] == [0]
    dal.write(pa.table({"id": [2]}), "m.n")
    assert sorted(dal.open("m.n").to_arrow().to_pylist(), key=lambda r: r["id"])[1] == {"id": 2, "city": None}


@pytest.mark.spark
def test_spark_append_without_a_nullable_column(sqlite_env: Catalog, spark: object) -> None:
    dal.write(pa.table({"id": [1], "city": ["a"]}), "m.s")
    df = spark.createDataFrame([(2,)], "id long")  # type: ignore[attr-defined]
    v = dal.write(df, "m.s")
    assert v.number == 1 and [f.name for f in v.schema] == ["id", "city"]
    rows = sorted(dal.open("m.s").to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "city": "a"}, {"id": 2, "city": None}]
