"""Time zones between Spark and dal: data Spark writes under any ``spark.sql.session.timeZone``, windows on it
through every read path (Spark's included) against pandas, and ``timestamp_ntz`` read back by ``to_spark`` in
a session of another zone (issue #23, items 2 and 11)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import TimePartitions
from dal.catalog import Catalog
from dal.storage import timeparts
from tests.reader.test_time_partitions import LAYOUTS as LAYOUTS_OF_READER
from tests.reader.test_time_partitions import WINDOWS, check_paths, epoch_hours, expected, frame

pytestmark = [pytest.mark.spark, pytest.mark.slow]
# (session zone, hour partitions too); UTC days and hours: tests/reader/test_time_partitions.py
LAYOUTS = [("America/Los_Angeles", True), ("Asia/Kolkata", False)]


@contextmanager
def session_zone(spark: Any, zone: str) -> Iterator[None]:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def spark_ids(df: Any) -> list[int]:
    return sorted(int(r["id"]) for r in df.select("id").collect())


def tf_ids(scan: dal.Scan) -> list[int]:
    return sorted(int(i) for b in scan.select("id").to_tf(batch_size=32) for i in b["id"].numpy())


def test_spark_session_zones(sqlite_env: Catalog, spark: Any) -> None:
    """``date = to_date(ts)`` and ``hour = hour(ts)`` cut in the session's zone: dal proves that rule while its
    executors write the rows (recorded with the session's zone) and every path, Spark's own included, gives the
    rows pandas gives, under that session zone. An ingestion date proves nothing: the window filters."""
    from pyspark.sql import functions as F

    pytest.importorskip("tensorflow")  # CI installs it (dal[tf]); skipping fails the run there
    df = frame()
    for zone, hours in LAYOUTS:
        with session_zone(spark, zone):
            sdf = spark.createDataFrame(df[["id", "ts"]]).withColumn("date", F.to_date("ts"))
            parts = ["date", "hour"] if hours else ["date"]
            if hours:
                sdf = sdf.withColumn("hour", F.hour("ts"))
            name = "z." + zone.replace("/", "_").lower()
            dal.write(sdf, name, partition_by=parts, time_column="ts")
            ds = dal.open(name)
            rule = timeparts.rule_of(ds.version.properties, ds.info.properties)
            assert rule == TimePartitions("date", "hour" if hours else None, zone, "ts")
            for window in WINDOWS[:3]:
                check_paths(ds.window(*window), expected(df, window))
            for window in WINDOWS[:1] if hours else WINDOWS[:2]:  # Spark reading many partitions is slow here
                scan, want = ds.window(*window), expected(df, window)
                assert sorted(i for r in range(2) for i in spark_ids(scan.shard(r, 2, "keep").to_spark(spark))) == want
                if not hours:
                    assert spark_ids(scan.to_spark(spark)) == want
                    assert tf_ids(scan) == want
    with session_zone(spark, "America/Los_Angeles"):
        sdf = spark.createDataFrame(df[["id", "ts"]]).withColumn("date", F.lit("2024-03-11"))
        dal.write(sdf, "z.ingested", partition_by=["date"], time_column="ts")
        ds = dal.open("z.ingested")
        assert timeparts.rule_of(ds.version.properties, ds.info.properties) is None
        for window in WINDOWS[:3]:
            check_paths(ds.window(*window), expected(df, window))
        assert spark_ids(ds.window(*WINDOWS[0]).to_spark(spark)) == expected(df, WINDOWS[0])


def test_to_spark_keeps_timestamp_ntz_wall_clocks_in_any_session_zone(sqlite_env: Catalog, spark: Any) -> None:
    """A timestamp_ntz column (Spark's, or naive timestamps written from pandas) came back from to_spark as a
    zoned timestamp, shown 9 hours later in a Tokyo session."""
    from pyspark.sql import functions as F

    wall = pd.Series(pd.date_range("2024-04-01 10:00", periods=48, freq="37min"))
    with session_zone(spark, "UTC"):
        sdf = spark.createDataFrame(pd.DataFrame({"id": np.arange(48), "s": wall.dt.strftime("%Y-%m-%d %H:%M:%S")}))
        dal.write(sdf.withColumn("t", F.to_timestamp_ntz("s")).drop("s"), "n.spark")
    dal.write(pd.DataFrame({"id": np.arange(48), "t": wall}), "n.pandas", partition_by=[])
    for zone in ("Asia/Tokyo", "America/Los_Angeles"):
        with session_zone(spark, zone):
            for name in ("n.spark", "n.pandas"):
                for scan in (dal.open(name).scan(), dal.open(name).shard(0, 1)):  # Spark's reader; dal's tasks
                    got = scan.to_spark(spark)
                    assert got.schema["t"].dataType.typeName() == "timestamp_ntz"
                    shown = {r["id"]: r["s"] for r in got.select("id", F.col("t").cast("string").alias("s")).collect()}
                    assert shown == dict(enumerate(wall.dt.strftime("%Y-%m-%d %H:%M:%S")))
                # a window on it: naive bounds are wall clocks (dal reads naive as UTC), whatever the session zone
                scan = dal.open(name).window("2024-04-01T12:00", "2024-04-01T20:00", column="t")
                want = [i for i, t in enumerate(wall) if datetime(2024, 4, 1, 12) <= t < datetime(2024, 4, 1, 20)]
                assert spark_ids(scan.to_spark(spark)) == want == sorted(scan.to_arrow().column("id").to_pylist())
                assert spark_ids(dal.open(name).filter("t < '2024-04-01 12:00:00'").to_spark(spark)) == [
                    i for i, t in enumerate(wall) if t < datetime(2024, 4, 1, 12)
                ]


def test_int96_timestamps_stay_instants(sqlite_env: Catalog, spark: Any, tmp_path: Path) -> None:
    """Spark's legacy INT96 Parquet timestamps are instants (pyarrow reads them naive): to_spark keeps them
    TimestampType, the values Spark's own reader gives."""
    with session_zone(spark, "Asia/Tokyo"):
        spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
        try:
            src = spark.createDataFrame(pd.DataFrame({"id": [0, 1], "ts": pd.to_datetime(["2024-04-01T00:00Z"] * 2)}))
            src.write.parquet(str(tmp_path / "int96"))
        finally:
            spark.conf.unset("spark.sql.parquet.outputTimestampType")
        assert any(
            pq.ParquetFile(p).schema.column(1).physical_type == "INT96" for p in (tmp_path / "int96").glob("*.parquet")
        )
        dal.register("n.int96", str(tmp_path / "int96"), format="parquet")
        theirs = {r["id"]: r["ts"] for r in spark.read.parquet(str(tmp_path / "int96")).collect()}
        for scan in (dal.open("n.int96").scan(), dal.open("n.int96").shard(0, 1)):
            got = scan.to_spark(spark)
            assert got.schema["ts"].dataType.typeName() == "timestamp"
            assert {r["id"]: r["ts"] for r in got.collect()} == theirs
        assert pa.types.is_timestamp(dal.open("n.int96").arrow_schema().field("ts").type)


@pytest.mark.parametrize(
    ("layout", "window"),
    [("date=LA, LA time column", WINDOWS[1]), ("date=/hour= Tokyo, declared", WINDOWS[6]), ("ts=<epoch>", WINDOWS[4])],
)
def test_to_spark_over_pandas_and_registered_layouts(
    sqlite_env: Catalog, spark: Any, tmp_path: Path, layout: str, window: tuple[str | None, str | None]
) -> None:
    """to_spark (Spark's reader, and dal's tasks when sharded) gives pandas' rows on the layouts dal proves, is
    told, or needs no rule for (tests/reader/test_time_partitions.py runs the other paths over all of them)."""
    build, _rule = LAYOUTS_OF_READER[layout]
    df = frame()
    ds = build(tmp_path, df)
    reference = df if layout != "ts=<epoch>" else df.assign(ts=epoch_hours(df.ts))
    with session_zone(spark, "Asia/Tokyo"):
        scan, want = ds.window(*window), expected(reference, window)
        assert spark_ids(scan.to_spark(spark)) == want
        assert sorted(i for r in range(2) for i in spark_ids(scan.shard(r, 2, "keep").to_spark(spark))) == want
