"""Petastorm and plain-Parquet datasets on a real S3 API (moto server): written row by row and by Spark,
appended, overwritten, raced, adopted; every version pinned and decoded; no secret anywhere."""

from __future__ import annotations

import io
from typing import Any

import boto3
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.formats.petastorm.encode import write_files
from dal.formats.petastorm.format import PetastormFormat
from dal.storage.location import Location
from tests.objectstores import SECRET
from tests.petastorm.test_petastorm_dataset import SCHEMA, frames


def _client(options: dict[str, str]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=options["AWS_ENDPOINT_URL"],
        aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


def _keys(options: dict[str, str], bucket: str, prefix: str) -> list[str]:
    pages = _client(options).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def _ids(name: str, options: dict[str, str], version: int | None = None) -> list[int]:
    return sorted(int(i) for i in dal.open(name, version, storage_options=options).to_numpy(["id"])["id"])


def test_petastorm_on_s3_versions_decode_and_hold_no_secret(
    sqlite_env: Catalog, sqlite_url: str, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    v0 = dal.write(frames(9), "s3.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"],
                   storage_options=options)  # fmt: skip
    v1 = dal.write(frames(3, 100), "s3.frames", format="petastorm", storage_options=options)
    v2 = dal.write(frames(2, 200), "s3.frames", format="petastorm", mode="overwrite", storage_options=options)
    assert [(v.number, v.operation, v.row_count) for v in (v0, v1, v2)] == [
        (0, "create", 9), (1, "append", 12), (2, "overwrite", 2)
    ]  # fmt: skip
    assert [p.key for p in sqlite_env.partitions("s3.frames", 1)] == ["camera=cam0", "camera=cam1", "camera=cam2"]
    assert _ids("s3.frames", options, 0) == list(range(9))
    assert _ids("s3.frames", options, 1) == [*range(9), 100, 101, 102]
    assert _ids("s3.frames", options) == [200, 201]

    pinned = dal.open("s3.frames", 1, storage_options=options)
    url = pinned.petastorm_url
    assert url.startswith(f"s3://{bucket}/wh/s3.frames/v1-")
    keys = _keys(options, bucket, "wh/s3.frames/")
    directory = url.removeprefix(f"s3://{bucket}/")
    assert f"{directory}/_common_metadata" in keys
    assert [k for k in keys if "_dal_versions" in k] == [f"wh/s3.frames/_dal_versions/{n:020d}.json" for n in range(3)]
    decoded = pinned.filter("camera = 'cam1'").to_numpy()
    order = np.argsort(decoded["id"])
    assert decoded["id"][order].tolist() == [1, 4, 7, 100]
    np.testing.assert_array_equal(decoded["depth"][order][-1], np.full((4, 4), 100, np.float32))
    np.testing.assert_array_equal(decoded["rgb"][order][0], np.full((6, 8, 3), 1, np.uint8))
    shards = [
        dal.open("s3.frames", 1, storage_options=options).shard(r, 2, "keep").select("id").to_numpy()["id"].tolist()
        for r in range(2)
    ]
    assert sorted(shards[0] + shards[1]) == [*range(9), 100, 101, 102] and len(shards[0]) == len(shards[1])

    # neither the catalog nor any object dal wrote holds the secret
    from pathlib import Path

    assert SECRET.encode() not in Path(sqlite_url.removeprefix("sqlite:///")).read_bytes()
    client = _client(options)
    for key in keys:
        assert SECRET.encode() not in client.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_a_writer_that_loses_the_race_takes_the_next_number_and_keeps_both(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]]
) -> None:
    """Two writers both aim at version 1; the conditional PUT lets one record it, the other rebases."""
    bucket, options = s3
    location = f"s3://{bucket}/race"
    fmt, loc = PetastormFormat(), Location.of(location, options)
    encode = fmt.encode
    first = fmt.start(location, options)
    fmt.commit(location, SCHEMA, first, write_files(loc, first, encode(SCHEMA, _cols(frames(2)), []), []),
               mode="append", storage_options=options)  # fmt: skip
    dal.register("s3.race", location, format="petastorm", storage_options=options)
    a, b = fmt.start(location, options), fmt.start(location, options)
    assert a.startswith("v1-") and b.startswith("v1-") and a != b
    files_a = write_files(loc, a, encode(SCHEMA, _cols(frames(2, 10)), []), [])
    files_b = write_files(loc, b, encode(SCHEMA, _cols(frames(3, 20)), []), [])
    assert fmt.commit(location, SCHEMA, a, files_a, mode="append", storage_options=options) == 1
    assert fmt.commit(location, SCHEMA, b, files_b, mode="append", storage_options=options) == 2
    assert [(v.number, v.row_count) for v in dal.sync("s3.race", storage_options=options)] == [(1, 4), (2, 7)]
    assert _ids("s3.race", options, 1) == [0, 1, 10, 11]
    assert _ids("s3.race", options, 2) == [0, 1, 10, 11, 20, 21, 22]  # the loser rebased onto the winner
    assert not [k for k in _keys(options, bucket, "race/") if k.startswith(f"race/{b}/")]  # moved to v2-…


def _cols(rows: list[dict[str, object]]) -> dict[str, list[object]]:
    return {k: [r[k] for r in rows] for k in rows[0]}


def test_a_petastorm_dataset_and_plain_parquet_on_s3_are_adopted(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], tmp_path: Any
) -> None:
    bucket, options = s3
    client = _client(options)
    # a dataset as petastorm's materialize_dataset leaves it (same bytes: see tests/petastorm/test_interop.py)
    dal.write(frames(5), "local.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"])
    local = dal.open("local.frames").petastorm_url.removeprefix("file://")
    from pathlib import Path

    for p in Path(local).rglob("*"):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"adopted/{p.relative_to(local)}", Body=p.read_bytes())
    (v,) = dal.register("s3.adopted", f"s3://{bucket}/adopted", format="petastorm", storage_options=options)
    assert (v.row_count, v.partition_columns) == (5, ("camera",))
    assert _ids("s3.adopted", options) == list(range(5))
    assert dal.open("s3.adopted", storage_options=options).petastorm_url == f"s3://{bucket}/adopted"
    with pytest.raises(dal.DalError, match="dal did not write"):
        dal.write(frames(1, 9), "s3.adopted", format="petastorm", storage_options=options)

    for day, n in (("2026-01-01", 3), ("2026-01-02", 2)):
        buf = io.BytesIO()
        pq.write_table(pa.table({"v": list(range(n))}), buf)
        client.put_object(Bucket=bucket, Key=f"plain/day={day}/part-0.parquet", Body=buf.getvalue())
    (p,) = dal.register("s3.plain", f"s3://{bucket}/plain", format="parquet", storage_options=options)
    assert (p.row_count, p.file_count, p.partition_columns) == (5, 2, ("day",))
    got = dal.open("s3.plain", storage_options=options).filter("day = '2026-01-02'").to_arrow().to_pylist()
    assert sorted((r["day"], r["v"]) for r in got) == [("2026-01-02", 0), ("2026-01-02", 1)]


def test_torch_reads_petastorm_tensors_from_s3(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    dal.write(frames(40), "s3.tensors", format="petastorm", schema=SCHEMA, storage_options=options)
    data = dal.open("s3.tensors", storage_options=options).select("id", "depth", "rgb").to_torch(batch_size=8)
    batches = list(DataLoader(data, batch_size=None, num_workers=2))
    assert batches[0]["depth"].dtype == torch.float32 and tuple(batches[0]["rgb"].shape[1:]) == (6, 8, 3)
    ids = sorted(int(i) for b in batches for i in b["id"])
    assert ids == list(range(40))
    for b in batches:
        assert torch.equal(b["depth"][:, 0, 0], b["id"].to(torch.float32))


@pytest.mark.spark
def test_spark_writes_petastorm_to_s3(
    sqlite_env: Catalog, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch, spark: Any
) -> None:
    from tests.petastorm.test_spark_petastorm import spark_frames

    bucket, options = s3
    monkeypatch.setenv("DAL_WAREHOUSE", f"s3://{bucket}/wh")
    v = dal.write(spark_frames(spark, 30), "s3.sparkframes", format="petastorm", schema=SCHEMA,
                  partition_by=["camera"], storage_options=options)  # fmt: skip
    assert (v.number, v.row_count, v.partition_columns) == (0, 30, ("camera",))
    got = dal.open("s3.sparkframes", storage_options=options).to_numpy()
    order = np.argsort(got["id"])
    assert got["id"][order].tolist() == list(range(30))
    np.testing.assert_array_equal(got["rgb"][order][9], np.full((6, 8, 3), 9, np.uint8))
    # and Spark reads the pinned version back from S3 (executors read with pyarrow: no S3A here)
    sdf = (
        dal.open("s3.sparkframes", 0, storage_options=options).filter("id < 10").select("id", "camera").to_spark(spark)
    )
    assert sorted((r["id"], r["camera"]) for r in sdf.collect()) == [(i, f"cam{i % 3}") for i in range(10)]


def test_cli_registers_and_syncs_s3_datasets_with_credentials_from_the_environment(
    sqlite_env: Catalog, sqlite_url: str, s3: tuple[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from dal.cli.app import cli

    bucket, options = s3
    location = f"s3://{bucket}/cli-frames"
    fmt, loc = PetastormFormat(), Location.of(location, options)
    for n, start in ((2, 0), (3, 10)):
        d = fmt.start(location, options)
        files = write_files(loc, d, fmt.encode(SCHEMA, _cols(frames(n, start)), []), [])
        fmt.commit(location, SCHEMA, d, files, mode="append", storage_options=options)
    for key, value in options.items():  # the CLI takes no credentials: they come from the environment
        monkeypatch.setenv(key, value)
    run = CliRunner()
    r = run.invoke(cli, ["--catalog", sqlite_url, "register", "s3.cli", location, "--format", "petastorm"])
    assert r.exit_code == 0, r.output
    assert [v.row_count for v in sqlite_env.versions("s3.cli")] == [2, 5]
    d = fmt.start(location, options)
    fmt.commit(location, SCHEMA, d, write_files(loc, d, fmt.encode(SCHEMA, _cols(frames(1, 99)), []), []),
               mode="overwrite", storage_options=options)  # fmt: skip
    r = run.invoke(cli, ["--catalog", sqlite_url, "sync", "s3.cli", "--json"])
    assert r.exit_code == 0, r.output
    assert [(v.number, v.operation, v.row_count) for v in sqlite_env.versions("s3.cli")][-1] == (2, "overwrite", 1)
    assert _ids("s3.cli", {}) == [99]  # the reader, too, finds the credentials in the environment
    assert dal.write(frames(1, 7), "s3.cli", format="petastorm").number == 3  # and so does the commit (obstore)
    assert _ids("s3.cli", {}) == [7, 99]
