"""A schema overwrite of a partitioned Delta table (issue 23, item 4), from pandas and from Spark alike.

``mode='overwrite', schema_mode='overwrite'`` may change the partitioning: ``partition_by=[...]`` names the new
one, ``partition_by=[]`` drops it, and leaving it out keeps the table's when the new data still has those columns.
A new schema without the partition columns and no ``partition_by`` is refused before anything is written, with
the call that works. After every variant delta-rs (the reference) still opens the table, every version reads the
same through delta-rs and dal, and a later append works. Refusals of local writes carry no object-store hint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import deltalake
import pandas as pd
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import FormatError, SchemaMismatch


def first(n: int = 12) -> pd.DataFrame:
    return pd.DataFrame({"id": range(n), "day": [f"d{i % 3}" for i in range(n)], "x": [i / 2 for i in range(n)]})


def replacement(with_day: bool = False) -> pd.DataFrame:
    data: dict[str, Any] = {"id": [100, 101, 102, 103], "label": ["a", "b", "a", None]}
    if with_day:
        data["day"] = ["d9", "d9", "d8", "d8"]
    return pd.DataFrame(data)


def storage(location: str) -> tuple[list[str], list[str]]:
    """The Delta log and the data files: what a refused write must leave as it was."""
    log = sorted(os.listdir(os.path.join(location, "_delta_log")))
    return log, sorted(str(p.relative_to(location)) for p in Path(location).rglob("*.parquet"))


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def assert_every_version_reads(cat: Catalog, name: str) -> None:
    """delta-rs opens the table; each catalog version reads the same rows through delta-rs and dal; sync finds
    nothing unrecorded; another append lands as the next version."""
    location = cat.get_dataset(name).location
    table = deltalake.DeltaTable(location)
    versions = cat.versions(name)
    assert table.version() == versions[-1].storage_version
    for v in versions:
        theirs = deltalake.DeltaTable(location, version=v.storage_version).to_pyarrow_table()
        ours = dal.open(name, v.number).to_arrow()
        assert rows(ours) == rows(theirs.select(ours.column_names)), f"version {v.number}"
        assert sorted(theirs.column_names) == sorted(ours.column_names) == sorted(v.schema.names)
        assert theirs.num_rows == v.row_count
    assert dal.sync(name) == []
    latest = dal.open(name).to_arrow()
    extra = pa.table({c: pa.nulls(1, latest.schema.field(c).type) for c in latest.column_names}).set_column(
        latest.column_names.index("id"), "id", pa.array([999], latest.schema.field("id").type)
    )
    after = dal.write(extra, name)
    assert after.number == versions[-1].number + 1 and after.row_count == versions[-1].row_count + 1
    assert deltalake.DeltaTable(location).to_pyarrow_table().num_rows == after.row_count


def test_pandas_schema_overwrite_variants(sqlite_env: Catalog) -> None:
    # partition_by=[]: the new version is not partitioned
    dal.write(first(), "ow.none", partition_by=["day"])
    v = dal.write(replacement(), "ow.none", mode="overwrite", schema_mode="overwrite", partition_by=[])
    assert (v.operation, v.partition_columns, v.schema.names) == ("overwrite", (), ("id", "label"))
    assert_every_version_reads(sqlite_env, "ow.none")
    # partition_by left out, the new data keeps the column: the table keeps its partitioning
    dal.write(first(), "ow.keep", partition_by=["day"])
    v = dal.write(replacement(with_day=True), "ow.keep", mode="overwrite", schema_mode="overwrite")
    assert v.partition_columns == ("day",) and "x" not in v.schema.names
    assert_every_version_reads(sqlite_env, "ow.keep")
    # partition_by names a new column: repartitioned
    dal.write(first(), "ow.label", partition_by=["day"])
    v = dal.write(replacement(), "ow.label", mode="overwrite", schema_mode="overwrite", partition_by=["label"])
    assert v.partition_columns == ("label",)
    assert_every_version_reads(sqlite_env, "ow.label")


def test_pandas_refusals_come_before_anything_is_written(sqlite_env: Catalog) -> None:
    dal.write(first(), "ow.bad", partition_by=["day"])
    location = sqlite_env.get_dataset("ow.bad").location
    before = (storage(location), sqlite_env.versions("ow.bad"))
    # the new schema lacks the partition column and partition_by says nothing: refused with the way out
    with pytest.raises(SchemaMismatch, match=r"partitioned by \['day'\].*no column day.*partition_by=\[\]") as e:
        dal.write(replacement(), "ow.bad", mode="overwrite", schema_mode="overwrite")
    assert "credentials" not in str(e.value) and "bucket" not in str(e.value)  # a local table: no storage hint
    # a new partitioning needs a schema overwrite, as in Delta
    with pytest.raises(SchemaMismatch, match=r"not \['id'\]; to change that.*schema_mode='overwrite'"):
        dal.write(first(2), "ow.bad", mode="overwrite", partition_by=["id"])
    with pytest.raises(SchemaMismatch, match=r"not \[\]"):
        dal.write(first(2), "ow.bad", partition_by=[])
    with pytest.raises(SchemaMismatch, match="partition_by names columns not in the data: nope"):
        dal.write(replacement(), "ow.bad", mode="overwrite", schema_mode="overwrite", partition_by=["nope"])
    with pytest.raises(SchemaMismatch, match="names label more than once"):
        dal.write(replacement(), "ow.bad", mode="overwrite", schema_mode="overwrite", partition_by=["label"] * 2)
    nested = pa.table({"id": [1], "s": pa.array([{"a": 1}])})
    with pytest.raises(SchemaMismatch, match=r"cannot partition .* by s \(struct<a: int64>\)"):
        dal.write(nested, "ow.bad", mode="overwrite", schema_mode="overwrite", partition_by=["s"])
    assert (storage(location), sqlite_env.versions("ow.bad")) == before
    assert_every_version_reads(sqlite_env, "ow.bad")


def test_data_without_columns_is_refused_without_a_storage_hint(sqlite_env: Catalog) -> None:
    for data in (pd.DataFrame(), pd.DataFrame(index=[0, 1])):
        with pytest.raises(SchemaMismatch, match="the data has no columns") as e:
            dal.write(data, "ow.empty")
        assert "hint" not in str(e.value)
    assert sqlite_env.list_datasets() == []


def test_storage_hints_only_for_object_store_errors() -> None:
    from dal.errors import storage_hint, translate

    local = "Generic error: Partition column(s) not found in write schema: day"
    assert storage_hint(local) == ""
    assert storage_hint("Generic error: At least one column must be defined to create a table.") == ""
    assert storage_hint("field 'x', row 403: expected 2 values") == ""
    s3 = "Generic S3 error: Error after 10 retries ... error sending request for url (http://127.0.0.1:1/b/x)"
    assert "object store cannot be reached" in storage_hint(s3)
    assert "access denied" in storage_hint("Generic S3 error: Client error with status 403 Forbidden")
    assert "hint" not in str(translate(OSError(s3), "writing /tmp/x", local=True))
    assert "hint" in str(translate(OSError(s3), "writing s3://b/x"))
    assert isinstance(translate(OSError(local), "x"), FormatError)


@pytest.mark.spark
def test_spark_schema_overwrite_variants(sqlite_env: Catalog, spark: Any) -> None:
    """From Spark the executors stage the files and the driver commits them: a new partitioning is one version
    (before, delta-rs committed the new schema with the old partitionColumns and no reader could open the table)."""
    from pyspark.sql import functions as F

    def base() -> Any:
        return spark.range(0, 12, numPartitions=2).select(
            "id", F.concat(F.lit("d"), (F.col("id") % 3).cast("string")).alias("day"), (F.col("id") / 2).alias("x")
        )

    def new(with_day: bool = False) -> Any:
        df = spark.createDataFrame(replacement(with_day))
        return df.repartition(2)

    dal.write(base(), "sow.none", partition_by=["day"])
    v = dal.write(new(), "sow.none", mode="overwrite", schema_mode="overwrite", partition_by=[])
    assert (v.operation, v.partition_columns, v.row_count) == ("overwrite", (), 4)
    assert_every_version_reads(sqlite_env, "sow.none")

    dal.write(base(), "sow.keep", partition_by=["day"])
    v = dal.write(new(with_day=True), "sow.keep", mode="overwrite", schema_mode="overwrite")
    assert v.partition_columns == ("day",) and sorted(v.schema.names) == ["day", "id", "label"]
    assert_every_version_reads(sqlite_env, "sow.keep")

    dal.write(base(), "sow.label", partition_by=["day"])
    v = dal.write(new(), "sow.label", mode="overwrite", schema_mode="overwrite", partition_by=["label"])
    assert (v.operation, v.partition_columns) == ("overwrite", ("label",))
    assert sorted(p.key for p in sqlite_env.partitions("sow.label", v.number)) == [
        "label=__HIVE_DEFAULT_PARTITION__",
        "label=a",
        "label=b",
    ]
    assert_every_version_reads(sqlite_env, "sow.label")

    dal.write(base(), "sow.bad", partition_by=["day"])
    location = sqlite_env.get_dataset("sow.bad").location
    before = (storage(location), sqlite_env.versions("sow.bad"))
    with pytest.raises(SchemaMismatch, match=r"no column day: pass partition_by=\[\.\.\.\]"):
        dal.write(new(), "sow.bad", mode="overwrite", schema_mode="overwrite")
    assert (storage(location), sqlite_env.versions("sow.bad")) == before
    assert_every_version_reads(sqlite_env, "sow.bad")
