"""Spark (local) writes Delta distributedly without the Delta jars; pinned versions read back in Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import SchemaMismatch
from dal.formats.registry import get_format
from dal.spark.session import get_spark, native_source
from tests.conftest import NOT_SERVED_PG

pytestmark = pytest.mark.spark
served_once = pytest.mark.parametrize("catalog_url_or_served", NOT_SERVED_PG, indirect=True)


def sensor_frame(spark: Any, n: int = 600, start: int = 0, parts: int = 4) -> Any:
    from pyspark.sql import functions as F

    return spark.range(start, start + n, numPartitions=parts).select(
        F.col("id"),
        (F.col("id") / 7).alias("x"),
        F.concat(F.lit("2026-01-0"), (F.col("id") % 3 + 1).cast("string")).alias("date"),
        (F.col("id") % 2).cast("int").alias("hour"),
        F.timestamp_seconds(F.lit(1767225600) + F.col("id") * 61).alias("ts"),
        F.when(F.col("id") % 5 == 0, None).otherwise(F.col("id").cast("string")).alias("label"),
    )


def _naive_utc(v: Any) -> Any:
    # Spark's collect() gives naive datetimes (session time zone UTC); Arrow gives aware UTC ones
    return v.astimezone(UTC).replace(tzinfo=None) if isinstance(v, datetime) and v.tzinfo else v


def rows(table: pa.Table) -> set[tuple[Any, ...]]:
    return {tuple(_naive_utc(v) for v in r.values()) for r in table.to_pylist()}


def spark_rows(df: Any, names: list[str]) -> set[tuple[Any, ...]]:
    return {tuple(_naive_utc(r[n]) for n in names) for r in df.collect()}


def expected_rows(n: int, start: int = 0) -> set[tuple[Any, ...]]:
    """What sensor_frame generates, computed without Spark."""
    epoch = datetime(2026, 1, 1)
    return {
        (i, i / 7, f"2026-01-0{i % 3 + 1}", i % 2, epoch + timedelta(seconds=61 * i), None if i % 5 == 0 else str(i))
        for i in range(start, start + n)
    }


@served_once
def test_distributed_write_is_one_delta_version_with_partitions_and_stats(cat: Catalog, spark: Any) -> None:
    df = sensor_frame(spark)
    # target_file_size=1: the four Spark partitions stay four tasks (as without a target)
    v = dal.write(df, "spark.sensors", partition_by=["date", "hour"], time_column="ts", target_file_size=1)
    location = cat.get_dataset("spark.sensors").location
    table = deltalake.DeltaTable(location)
    assert table.version() == 0 and (v.number, v.storage_version, v.row_count) == (0, 0, 600)
    assert v.partition_columns == ("date", "hour") and cat.get_dataset("spark.sensors").time_column == "ts"
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    assert len(actions) == v.file_count and len(actions) > 6  # several executors x six partitions
    for a in actions:  # stats and partition values in the log match each file's content
        data = pq.read_table(os.path.join(location, a["path"]))
        assert "date" not in data.column_names and data.num_rows == a["num_records"]
        assert (a["min.id"], a["max.id"]) == (min(data["id"].to_pylist()), max(data["id"].to_pylist()))
        assert a["min.ts"] <= min(data["ts"].to_pylist()) and a["max.ts"] >= max(data["ts"].to_pylist())
        assert a["null_count.label"] == data["label"].null_count
        assert {r % 3 + 1 for r in data["id"].to_pylist()} == {int(a["partition.date"][-1])}
        assert {r % 2 for r in data["id"].to_pylist()} == {a["partition.hour"]}
    expected = expected_rows(600)
    assert spark_rows(df, list(df.columns)) == expected
    assert rows(table.to_pyarrow_table().select(list(df.columns))) == expected  # delta-rs reads it
    assert rows(dal.open("spark.sensors").to_arrow().select(list(df.columns))) == expected
    assert sorted(p.row_count for p in cat.partitions("spark.sensors")) == [100] * 6


@served_once
def test_versions_read_back_pinned_in_spark(cat: Catalog, spark: Any) -> None:
    dal.write(sensor_frame(spark, 60), "spark.pinned", partition_by=["date"])
    dal.write(sensor_frame(spark, 30, start=1000), "spark.pinned")  # Spark append
    import pandas as pd

    more = pd.DataFrame(sensor_frame(spark, 5, start=2000).toPandas())
    with pytest.raises(SchemaMismatch, match="ts \\(timestamp\\[us, tz=UTC\\] -> timestamp\\[ns\\]\\)"):
        dal.write(more, "spark.pinned")  # toPandas() gives naive times: refused, never silently shifted
    more["ts"] = more["ts"].dt.tz_localize("UTC")
    dal.write(more, "spark.pinned")  # pandas append into the Spark-made table
    last = dal.write(sensor_frame(spark, 7, start=3000), "spark.pinned", mode="overwrite")
    assert [v.operation for v in cat.versions("spark.pinned")] == ["create", "append", "append", "overwrite"]
    assert last.row_count == 7
    names = ["id", "x", "date", "hour", "ts", "label"]
    for v in cat.versions("spark.pinned"):
        ds = dal.open("spark.pinned", v.number)
        sdf = ds.to_spark(spark)
        assert sdf.count() == v.row_count
        assert spark_rows(sdf, names) == rows(ds.to_arrow().select(names))
    assert dict(dal.open("spark.pinned").to_spark(spark).dtypes)["date"] == "string"


@served_once
def test_spark_schema_mismatch_is_refused_before_writing(cat: Catalog, spark: Any) -> None:
    from pyspark.sql import functions as F

    dal.write(sensor_frame(spark, 20), "spark.bad", partition_by=["date"])
    location = cat.get_dataset("spark.bad").location
    before = (cat.versions("spark.bad"), sorted(os.listdir(location)), sorted(os.listdir(f"{location}/_delta_log")))
    with pytest.raises(SchemaMismatch, match="x \\(double -> string\\)"):
        dal.write(sensor_frame(spark, 5).withColumn("x", F.lit("oops")), "spark.bad")
    with pytest.raises(SchemaMismatch, match="new columns: extra"):
        dal.write(sensor_frame(spark, 5).withColumn("extra", F.lit(1)), "spark.bad")
    assert before == (
        cat.versions("spark.bad"),
        sorted(os.listdir(location)),
        sorted(os.listdir(f"{location}/_delta_log")),
    )
    merged = dal.write(
        sensor_frame(spark, 5, start=100).withColumn("extra", F.lit(1)), "spark.bad", schema_mode="merge"
    )
    # from Spark without delta-spark a merge is two Delta versions: the new columns, then the rows
    assert [(v.operation, "extra" in v.schema.names) for v in cat.versions("spark.bad")] == [
        ("create", False),
        ("schema-change", True),
        ("append", True),
    ]
    assert merged.number == 2 and merged.row_count == 25
    got = {r["id"]: r["extra"] for r in dal.open("spark.bad").to_arrow().to_pylist()}
    assert got == {**dict.fromkeys(range(20)), **dict.fromkeys(range(100, 105), 1)}


@served_once
def test_spark_append_keeps_the_table_partitioning(cat: Catalog, spark: Any) -> None:
    dal.write(sensor_frame(spark, 30), "spark.parts", partition_by=["date"])
    v = dal.write(sensor_frame(spark, 30, start=100), "spark.parts")  # partition_by not repeated
    assert v.partition_columns == ("date",)
    assert {p.key: p.row_count for p in cat.partitions("spark.parts")} == {
        "date=2026-01-01": 20,
        "date=2026-01-02": 20,
        "date=2026-01-03": 20,
    }
    location = cat.get_dataset("spark.parts").location
    assert not [f for f in os.listdir(location) if f.endswith(".parquet")]  # every file sits in date=.../


def test_session_handling(spark: Any) -> None:
    assert get_spark(spark) is spark  # an explicit session is honoured
    assert get_spark() is spark  # else the active one; a new local[*] session only when none is active
    delta = get_format("delta")
    assert native_source(spark, delta) is None  # no Delta jars here: detected without crashing
    assert native_source(object(), delta) is None  # e.g. Spark Connect: no JVM handle


def test_delta_spark_classes_are_detected_when_on_the_classpath(tmp_path: Path) -> None:
    """A stub io.delta.tables.DeltaTable on spark.jars flips detection (the real jars cannot be downloaded)."""
    src = tmp_path / "io" / "delta" / "tables" / "DeltaTable.java"
    src.parent.mkdir(parents=True)
    src.write_text("package io.delta.tables; public class DeltaTable {}\n")
    subprocess.run(["javac", "-d", str(tmp_path / "classes"), str(src)], check=True)
    jar = tmp_path / "stub-delta.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(tmp_path / "classes"), "."], check=True)
    code = textwrap.dedent(
        f"""
        from pyspark.sql import SparkSession
        from dal.spark.session import native_source
        from dal.formats.registry import get_format
        s = SparkSession.builder.master("local[1]").config("spark.jars", {str(jar)!r}).getOrCreate()
        print("DETECTED", native_source(s, get_format("delta")) is not None)
        s.stop()
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "DETECTED True" in out.stdout, out.stderr[-2000:]


@served_once
def test_column_mapping_tables_read_by_logical_names(cat: Catalog, spark: Any, tmp_path: Path) -> None:
    """A table another engine switched to column mapping (renaming a column afterwards): dal and Spark read
    the files' physical columns under their logical names (was: refused, issue 12)."""
    where = str(tmp_path / "mapped")
    deltalake.write_deltalake(where, pa.table({"a": [1, 2], "b": ["x", "y"]}))
    meta = json.loads(next(line for line in open(f"{where}/_delta_log/{0:020d}.json") if '"metaData"' in line))[
        "metaData"
    ]
    schema = json.loads(meta["schemaString"])
    for i, f in enumerate(schema["fields"], start=1):
        f["metadata"] = {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f["name"]}
    schema["fields"][0]["name"] = "renamed"  # RENAME COLUMN a TO renamed: the files still say "a"
    meta["schemaString"] = json.dumps(schema)
    meta["configuration"] = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    commit = [
        {"commitInfo": {"timestamp": 1767225600000, "operation": "SET TBLPROPERTIES", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {"metaData": meta},
    ]
    Path(f"{where}/_delta_log/{1:020d}.json").write_text("\n".join(json.dumps(c) for c in commit) + "\n")
    dal.register("ext.mapped", where)
    assert [r["a"] for r in dal.open("ext.mapped", 0).to_arrow().to_pylist()] == [1, 2]  # before: fine
    ds = dal.open("ext.mapped", 1)
    expected = [{"renamed": 1, "b": "x"}, {"renamed": 2, "b": "y"}]
    assert sorted(ds.to_arrow().to_pylist(), key=str) == expected
    assert ds.filter("renamed > 1").select("renamed").to_arrow().to_pylist() == [{"renamed": 2}]
    rows = [r.asDict() for r in ds.to_spark(spark).collect()]
    assert sorted(rows, key=str) == expected
