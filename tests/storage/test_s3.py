"""Delta datasets, the reader and the torch adapter on a real S3 API (moto in server mode on loopback).

Credentials travel only in storage_options; the catalog database must never contain them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from tests.objectstores import SECRET, frame


def test_delta_on_s3_end_to_end_and_no_secret_in_the_catalog(
    sqlite_env: Catalog, sqlite_url: str, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/warehouse")
    v0 = dal.write(frame(48), "s3.rows", partition_by=["date"], time_column="ts", storage_options=options)
    v1 = dal.write(frame(24, 48), "s3.rows", storage_options=options)
    info = sqlite_env.get_dataset("s3.rows")
    assert info.location == f"s3://{bucket}/warehouse/s3.rows"
    assert (v0.row_count, v1.row_count, v1.storage_version) == (48, 72, 1)
    assert [p.key for p in sqlite_env.partitions("s3.rows", 0)] == ["date=2026-01-01", "date=2026-01-02"]

    pinned = dal.open("s3.rows", 0, storage_options=options)
    assert sorted(pinned.to_arrow().column("id").to_pylist()) == list(range(48))
    scan = dal.open("s3.rows", storage_options=options).filter("x >= 5").window("2026-01-02", "2026-01-03")
    assert len({t.uri for t in scan.plan()}) == 1  # only the 2026-01-02 partition's file is planned
    assert sorted(scan.select("id").to_arrow().column("id").to_pylist()) == list(range(24, 48))
    shards = [
        sorted(
            dal.open("s3.rows", storage_options=options)
            .shard(r, 3, "keep")
            .select("id")
            .to_arrow()
            .column("id")
            .to_pylist()
        )
        for r in range(3)
    ]
    assert sorted(sum(shards, [])) == list(range(72))  # noqa: RUF017

    # the catalog (every table, every row) holds neither the secret nor the key id
    raw = Path(sqlite_url.removeprefix("sqlite:///")).read_bytes()
    import sqlalchemy as sa

    with sa.create_engine(sqlite_url).connect() as conn:
        dumped = "".join(
            str(row)
            for t in ("dal_datasets", "dal_versions", "dal_schemas", "dal_schema_fields", "dal_partitions", "dal_tags")
            for row in conn.execute(sa.text(f"SELECT * FROM {t}"))
        )
    assert SECRET not in dumped and SECRET.encode() not in raw and "AKIDTEST" not in dumped


def test_register_and_sync_a_table_written_to_s3_by_delta_rs(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]]
) -> None:
    bucket, options = s3
    uri = f"s3://{bucket}/foreign"
    so = {**options, "AWS_ALLOW_HTTP": "true", "aws_conditional_put": "etag"}
    deltalake.write_deltalake(uri, pa.table({"a": [1, 2]}), storage_options=so)
    assert [v.row_count for v in dal.register("s3.foreign", uri, storage_options=options)] == [2]
    deltalake.write_deltalake(uri, pa.table({"a": [3]}), mode="append", storage_options=so)
    assert [x.storage_version for x in dal.sync("s3.foreign", storage_options=options)] == [1]
    assert sorted(dal.open("s3.foreign", storage_options=options).to_arrow().column("a").to_pylist()) == [1, 2, 3]
    assert sorted(dal.open("s3.foreign", 0, storage_options=options).to_arrow().column("a").to_pylist()) == [1, 2]


def test_torch_over_s3(sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    dal.write(frame(100), "s3.torch", storage_options=options)
    data = dal.open("s3.torch", storage_options=options).select("id", "x").to_torch(batch_size=16)
    ids: list[Any] = [int(i) for b in DataLoader(data, batch_size=None, num_workers=2) for i in b["id"]]
    assert sorted(ids) == list(range(100)) and torch is not None


@pytest.mark.spark
def test_spark_writes_and_reads_delta_on_s3_without_s3a(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    """No hadoop-aws here: Spark's executors do the S3 I/O with pyarrow, both ways."""
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    df = spark.createDataFrame(frame(60).assign(ts=lambda d: d.ts.dt.tz_localize(None))).repartition(3)
    # executors write with pyarrow's S3 (target_file_size=1: the three tasks each stage their files)
    v = dal.write(df, "s3.spark", partition_by=["date"], storage_options=options, target_file_size=1)
    assert (v.row_count, v.storage_version) == (60, 0) and v.file_count >= 3
    dal.write(frame(5, 500), "s3.spark", storage_options=options)  # a later version the pinned reads must not see
    pinned = dal.open("s3.spark", 0, storage_options=options)
    assert sorted(pinned.to_arrow().column("id").to_pylist()) == list(range(60))
    sdf = pinned.to_spark(spark)
    assert sorted(r["id"] for r in sdf.collect()) == list(range(60))
    assert dict(sdf.dtypes)["date"] == "string" and sdf.count() == 60
    scan = pinned.filter("x >= 10").window("2026-01-02", "2026-01-03", column="ts").select("id", "date")
    got = scan.to_spark(spark)
    assert got.columns == ["id", "date"]
    assert (
        sorted(r["id"] for r in got.collect())
        == sorted(scan.to_arrow().column("id").to_pylist())
        == list(range(24, 48))
    )


def test_tf_over_s3(sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    tf = pytest.importorskip("tensorflow")
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    dal.write(frame(50), "s3.tf", storage_options=options)
    data = dal.open("s3.tf", storage_options=options).filter("id >= 10").select("id", "x").to_tf(batch_size=16)
    assert data.element_spec["x"].dtype == tf.float64
    got = sorted(int(i) for batch in data for i in batch["id"].numpy())
    assert got == list(range(10, 50))
