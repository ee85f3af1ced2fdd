"""Spark DataFrames written with ``dal.write`` (executors write Parquet, the driver commits through delta-rs):
a struct and a boolean (issue 12), and every Spark type at once, read back by dal, delta-rs and Spark; types
Delta cannot hold are refused before anything is written. One Spark session for the module (conftest)."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog, DatasetNotFound
from dal.errors import SchemaMismatch

pytestmark = pytest.mark.spark

UTC = dt.UTC


def plain(v: Any) -> Any:
    """Spark Rows, Arrow maps (lists of pairs) and aware datetimes as comparable plain values."""
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, dict):  # an empty map comes back from Arrow as [], like an empty list
        return {k: plain(x) for k, x in v.items()} if v else []
    if isinstance(v, list) and v and all(type(x) is tuple and len(x) == 2 for x in v):
        return {plain(k): plain(x) for k, x in v}  # an Arrow map
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)  # Spark collects naive UTC (session time zone)
    return v


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted((plain(r) for r in table.to_pylist()), key=lambda r: r["id"])


def spark_rows(df: Any) -> list[dict[str, Any]]:
    return sorted((plain(r) for r in df.collect()), key=lambda r: r["id"])


def assert_same(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert {k: v for k, v in g.items() if v != e[k]} == {}, f"row {e['id']}: expected {e}"


def assert_everyone_reads(name: str, expected: list[dict[str, Any]], spark: Any) -> None:
    ds = dal.open(name)
    assert_same(arrow_rows(ds.to_arrow()), expected)  # dal
    assert_same(arrow_rows(deltalake.DeltaTable(ds.location).to_pyarrow_table()), expected)  # delta-rs
    assert_same(spark_rows(ds.to_spark(spark)), expected)  # Spark, through dal's pinned read
    assert_same(spark_rows(spark.read.parquet(*(f.uri for f in ds.files()))), expected)  # Spark on the files


def test_a_struct_and_a_boolean_round_trip(sqlite_env: Catalog, spark: Any) -> None:
    """Issue 12: version 0 was committed with nullCount {"s": 3}: unreadable, the name blocked."""
    from pyspark.sql import functions as F

    df = spark.range(0, 6, numPartitions=2).select(
        F.col("id"),
        (F.col("id") % 2 == 0).alias("even"),
        F.when(F.col("id") == 3, None)
        .otherwise(F.struct((F.col("id") * 10).alias("a"), F.struct((F.col("id") > 2).alias("big")).alias("n")))
        .alias("s"),
    )
    v = dal.write(df, "spark.struct_bool")
    assert (v.number, v.row_count) == (0, 6)
    expected = [
        {"id": i, "even": i % 2 == 0, "s": None if i == 3 else {"a": i * 10, "n": {"big": i > 2}}} for i in range(6)
    ]
    assert_everyone_reads("spark.struct_bool", expected, spark)
    # statistics a reader can skip with: nested, decoded by delta-rs
    actions = pa.table(deltalake.DeltaTable(dal.open("spark.struct_bool").location).get_add_actions(flatten=True))
    assert sum(actions.column("null_count.s.a").to_pylist()) == 1


def all_types_frame(spark: Any) -> tuple[Any, list[dict[str, Any]]]:
    from pyspark.sql import types as T

    ts = dt.datetime(2024, 2, 29, 12, 30, 1, 123456)
    schema = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("b", T.ByteType()),
            T.StructField("sh", T.ShortType()),
            T.StructField("i", T.IntegerType()),
            T.StructField("f", T.FloatType()),
            T.StructField("d", T.DoubleType()),
            T.StructField("dec", T.DecimalType(38, 18)),
            T.StructField("dec_small", T.DecimalType(5, 2)),
            T.StructField("s", T.StringType()),
            T.StructField("bin", T.BinaryType()),
            T.StructField("flag", T.BooleanType()),
            T.StructField("day", T.DateType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("ntz", T.TimestampNTZType()),
            T.StructField("arr_l", T.ArrayType(T.LongType())),
            T.StructField("arr_s", T.ArrayType(T.StringType())),
            T.StructField("arr_bool", T.ArrayType(T.BooleanType())),
            T.StructField("arr_dec", T.ArrayType(T.DecimalType(10, 3))),
            T.StructField("arr_day", T.ArrayType(T.DateType())),
            T.StructField("arr_ts", T.ArrayType(T.TimestampType())),
            T.StructField("arr_ntz", T.ArrayType(T.TimestampNTZType())),
            T.StructField("arr_bin", T.ArrayType(T.BinaryType())),
            T.StructField("arr_f", T.ArrayType(T.FloatType())),
            T.StructField("m", T.MapType(T.StringType(), T.IntegerType())),
            T.StructField("m_st", T.MapType(T.IntegerType(), T.StructType([T.StructField("x", T.ArrayType(T.DoubleType()))]))),
            T.StructField("st", T.StructType([T.StructField("a", T.ShortType()), T.StructField("n", T.StructType(
                [T.StructField("flag", T.BooleanType()), T.StructField("t", T.TimestampType()), T.StructField("bin", T.BinaryType())]))])),
            T.StructField("arr_st", T.ArrayType(T.StructType([T.StructField("k", T.StringType()), T.StructField("m", T.MapType(T.StringType(), T.DateType()))]))),
        ]
    )  # fmt: skip
    full = (
        1, -128, -32768, 2**31 - 1, 1.5, -2.25, Decimal("-12345678901234567890.123456789012345678"), Decimal("999.99"),
        "é" * 40, b"\x00\xff", True, dt.date(1, 1, 1), ts.replace(tzinfo=UTC), ts, [1, None], ["a", None], [True, None],
        [Decimal("1.500")], [dt.date(2020, 1, 1)], [ts.replace(tzinfo=UTC)], [ts], [b"x"], [0.5], {"k": 1, "n": None},
        {1: {"x": [1.0, None]}}, {"a": 7, "n": {"flag": False, "t": ts.replace(tzinfo=UTC), "bin": b"y"}},
        [{"k": "v", "m": {"d": dt.date(2000, 2, 29)}}],
    )  # fmt: skip
    empty = (2,) + (None,) * (len(schema.fields) - 1)
    partial: tuple[Any, ...] = (3, 0, 0, 0, float("inf"), -0.0, Decimal(0), Decimal(0), "", b"", False, dt.date(9999, 12, 31), None, None,
               [], [], [], [], [], [], [], [], [], {}, {}, {"a": None, "n": None}, [])  # fmt: skip
    df = spark.createDataFrame([full, empty, partial], schema, verifySchema=False).repartition(2)
    expected = sorted(
        (plain(dict(zip(schema.names, r, strict=True))) for r in (full, empty, partial)), key=lambda r: r["id"]
    )
    for r in expected:  # float32 as Spark and Arrow hand it back
        r["f"] = None if r["f"] is None else float(pa.scalar(r["f"], pa.float32()).as_py())
    return df, expected


def test_every_spark_type_round_trips_in_one_table(sqlite_env: Catalog, spark: Any) -> None:
    df, expected = all_types_frame(spark)
    v = dal.write(df, "spark.all_types")
    assert v.row_count == 3
    assert_everyone_reads("spark.all_types", expected, spark)
    # the catalog holds the Delta types, timestamps with and without time zone apart
    types = {f.name: f.type for f in v.schema.fields}
    assert (types["ts"], types["ntz"]) == ("timestamp[us, tz=UTC]", "timestamp[us]")


@pytest.mark.parametrize(
    ("column", "needle"),
    [
        ("F.lit(None)", "n (void): has no type"),
        ("F.make_dt_interval(F.lit(1))", "n (interval day to second): Delta has no interval type"),
        ("F.make_ym_interval(F.lit(1))", "n (interval year to month)"),
        ("F.array(F.struct(F.parse_json(F.lit('{}')).alias('v')))", "n[].v (variant)"),
    ],
)
def test_spark_types_delta_cannot_hold_are_refused_before_writing(
    sqlite_env: Catalog, spark: Any, column: str, needle: str
) -> None:
    from pyspark.sql import functions as F

    df = spark.range(2).withColumn("n", eval(column, {"F": F}))
    with pytest.raises(SchemaMismatch) as err:
        dal.write(df, "spark.bad")
    assert needle in str(err.value)
    assert not (Path(os.environ["DAL_WAREHOUSE"]) / "spark.bad").exists()
    with pytest.raises(DatasetNotFound):
        sqlite_env.get_dataset("spark.bad")
