"""Delta and Petastorm datasets on Azure Blob Storage (``az://`` and ``abfs://``), against Azurite — Microsoft's
emulator of the Blob API, from npm — on loopback, with an account key that must never reach the catalog."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.storage import uris
from tests.objectstores import AZURE_ACCOUNT, AZURE_KEY, frame
from tests.petastorm.test_petastorm_dataset import SCHEMA, frames


def test_delta_on_azure_end_to_end(
    sqlite_env: Catalog, sqlite_url: str, azure: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    container, options = azure
    monkeypatch.setenv("DAL_WAREHOUSE", f"az://{container}/wh")
    v0 = dal.write(frame(48), "az.rows", partition_by=["date"], time_column="ts", storage_options=options)
    v1 = dal.write(frame(24, 48), "az.rows", storage_options=options)
    assert (v0.row_count, v1.row_count, v1.storage_version) == (48, 72, 1)
    assert sorted(dal.open("az.rows", 0, storage_options=options).to_arrow().column("id").to_pylist()) == list(
        range(48)
    )
    scan = dal.open("az.rows", storage_options=options).filter("x >= 5").window("2026-01-02", "2026-01-03")
    assert len({t.uri for t in scan.plan()}) == 1
    assert sorted(scan.select("id").to_arrow().column("id").to_pylist()) == list(range(24, 48))
    shards = [dal.open("az.rows", storage_options=options).shard(r, 2).select("id").to_arrow() for r in range(2)]
    assert shards[0].num_rows == shards[1].num_rows == 36

    # a table delta-rs wrote itself, registered through the abfs:// spelling of the same container
    uri = f"abfs://{container}@{AZURE_ACCOUNT}.dfs.core.windows.net/foreign"
    deltalake.write_deltalake(uri, pa.table({"a": [1, 2]}), storage_options=uris.object_store_options(options))
    (r,) = dal.register("az.foreign", uri, storage_options=options)
    assert r.row_count == 2
    assert sorted(dal.open("az.foreign", storage_options=options).to_arrow().column("a").to_pylist()) == [1, 2]

    assert AZURE_KEY.encode() not in Path(sqlite_url.removeprefix("sqlite:///")).read_bytes()


def test_petastorm_on_azure(
    sqlite_env: Catalog, azure: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    container, options = azure
    monkeypatch.setenv("DAL_WAREHOUSE", f"az://{container}/wh")
    dal.write(
        frames(6), "az.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"], storage_options=options
    )
    v1 = dal.write(frames(2, 50), "az.frames", format="petastorm", storage_options=options)
    assert (v1.number, v1.row_count, v1.operation) == (1, 8, "append")
    got = dal.open("az.frames", 1, storage_options=options).to_numpy()
    order = np.argsort(got["id"])
    assert got["id"][order].tolist() == [0, 1, 2, 3, 4, 5, 50, 51]
    np.testing.assert_array_equal(got["depth"][order][-1], np.full((4, 4), 51, np.float32))
    assert dal.open("az.frames", 0, storage_options=options).petastorm_url.startswith(
        f"az://{container}/wh/az.frames/v0-"
    )


@pytest.mark.spark
def test_spark_writes_and_reads_azure_without_the_abfs_connector(
    sqlite_env: Catalog, azure: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    """pyspark ships no hadoop-azure: executors write and read the container with pyarrow's Azure client."""
    container, options = azure
    monkeypatch.setenv("DAL_WAREHOUSE", f"az://{container}/wh")
    df = spark.createDataFrame(frame(40).assign(ts=lambda d: d.ts.dt.tz_localize(None))).repartition(2)
    v = dal.write(df, "az.spark", partition_by=["date"], storage_options=options)
    assert (v.row_count, v.storage_version) == (40, 0)
    scan = dal.open("az.spark", storage_options=options).filter("x >= 3").select("id", "date")
    got = scan.to_spark(spark)
    assert (
        sorted(r["id"] for r in got.collect()) == sorted(scan.to_arrow().column("id").to_pylist()) == list(range(6, 40))
    )
