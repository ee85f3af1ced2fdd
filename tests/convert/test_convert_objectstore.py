"""The converter's cache on object storage (``dal.convert(df, cache_dir="s3://…")``, moto server): converted by
Spark's executors into the bucket, reused by a later conversion, removed by the last user's exit; racing
publishers in separate processes share one entry; a killed conversion's folder is never used and is swept."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import boto3
import pyarrow.parquet as pq
import pytest

import dal
from dal.errors import DalError
from dal.spark import convert_cache
from dal.storage import ownership
from dal.storage.location import Location

REPO = Path(__file__).resolve().parents[2]
KEY = "fedcba9876543210" * 2 + "fedcba98"  # a plan key: 40 hex digits, as dal.convert makes them


def keys(options: dict[str, str], bucket: str, prefix: str = "") -> list[str]:
    client = boto3.client("s3", endpoint_url=options["AWS_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"])  # fmt: skip
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    # not the empty "folder/" marker pyarrow's S3 client leaves for a parent when it deletes a folder
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []) if not o["Key"].endswith("/"))


@pytest.mark.spark
def test_convert_into_an_s3_cache_reuses_it_and_the_last_exit_removes_it(
    spark: Any, s3: tuple[str, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket, options = s3
    monkeypatch.setenv("DAL_HOME", str(tmp_path / "home"))
    df = spark.range(0, 500, numPartitions=3).selectExpr("id", "cast(id as double) / 4 as y", "id % 7 as k")
    url = f"s3://{bucket}/convert-cache"
    ds = dal.convert(df, cache_dir=url, storage_options=options)
    assert ds.location.startswith(f"{url}/") and ds.location.endswith("/table")
    expected = df.toPandas().sort_values("id").reset_index(drop=True)
    got = ds.to_pandas().sort_values("id").reset_index(drop=True)
    assert got["id"].tolist() == expected["id"].tolist() and got["k"].tolist() == expected["k"].tolist()
    assert got["y"].tolist() == pytest.approx(expected["y"].tolist())  # float32 by default
    stored = keys(options, bucket, "convert-cache/")
    markers = [k for k in stored if k.endswith(".ready")]
    assert len(markers) == 1 and any(k.endswith(".parquet") for k in stored)
    # the data files hold the rows (read by pyarrow, not dal)
    fs = Location.of(url, options).fs
    rows = sum(
        pq.ParquetFile(f"{bucket}/{k}", filesystem=fs).metadata.num_rows for k in stored if k.endswith(".parquet")
    )
    assert rows == 500

    again = dal.convert(df, cache_dir=url, storage_options=options)  # the same DataFrame: reused, not rewritten
    assert again.location == ds.location and again.number == ds.number == 0
    assert keys(options, bucket, "convert-cache/") == stored
    assert again.to_arrow().num_rows == 500

    # the cached table is no user's dataset; the last user's exit removes it from the bucket
    convert_cache.release_all()
    assert keys(options, bucket, "convert-cache/") == [f"convert-cache/{ownership.SENTINEL}"]  # the root stays dal's


def test_a_remote_cache_is_checked_before_spark_runs(spark: Any, tmp_path: Path) -> None:
    df = spark.range(3)
    with pytest.raises(DalError, match="cannot open"):
        dal.convert(df, cache_dir="nosuchscheme://bucket/cache")
    with pytest.raises(DalError, match="this cache is local"):
        dal.convert(df, cache_dir=str(tmp_path), storage_options={"AWS_REGION": "us-east-1"})


RACER = """
import json, os, sys, time
from dal.spark import convert_cache
from dal.storage.location import Location
root = Location.of(sys.argv[1], json.loads(sys.argv[2]))
folder = convert_cache.remote_begin(root, sys.argv[3])
root.write(folder + "/table/part-0.parquet", folder.encode())  # the "complete" conversion
while not os.path.exists(sys.argv[4]):
    time.sleep(0.02)
entry = convert_cache.remote_publish(root, sys.argv[3], folder, rows=1)
print(json.dumps({"mine": folder, "used": entry.folder, "data": root.read(entry.folder + "/table/part-0.parquet").decode()}), flush=True)
while not os.path.exists(sys.argv[5]):
    time.sleep(0.02)
"""  # exits normally: atexit releases the entry


def test_racing_publishers_on_s3_share_one_entry_and_the_last_user_removes_it(
    s3: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    bucket, options = s3
    url = f"s3://{bucket}/race"
    go, done = tmp_path / "go", tmp_path / "done"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", RACER, url, json.dumps(options), KEY, str(go), str(done)]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        deadline = time.monotonic() + 60
        while len({k.split("/")[1] for k in keys(options, bucket, "race/") if "/table/" in k}) < 3:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.1)
        go.touch()
        lines = [json.loads(p.stdout.readline()) for p in procs]  # type: ignore[union-attr]
        winners = {line["used"] for line in lines}
        assert len(winners) == 1  # every process uses the one published entry, and reads its bytes
        assert all(line["data"] == next(iter(winners)) for line in lines)
        stored = keys(options, bucket, "race/")
        assert f"race/{KEY}.ready" in stored
        assert {k.split("/")[1] for k in stored if "/" in k.removeprefix("race/")} == winners  # losers dropped theirs
    finally:
        done.touch()
        for p in procs:
            p.communicate(timeout=60)
    assert all(p.returncode == 0 for p in procs)
    assert keys(options, bucket, "race/") == [f"race/{ownership.SENTINEL}"]  # the last exit removed marker and folder


def test_a_killed_conversion_on_s3_is_never_used_and_is_swept(s3: tuple[str, dict[str, str]]) -> None:
    bucket, options = s3
    root = Location.of(f"s3://{bucket}/killed", options)
    dead = f"{socket.gethostname()}-{2**22 + 12345}"  # a pid no process has (above pid_max's default)
    abandoned = f"{KEY}-deadbeef0000"
    root.write(f"{abandoned}/table/_delta_log/00000000000000000000.json", b"{}")
    root.write(f"{abandoned}/users/{dead}", b"")
    assert convert_cache.remote_lookup(root, KEY) is None  # no marker: not complete, whatever the folder holds
    folder = convert_cache.remote_begin(root, KEY)  # the next conversion sweeps the dead writer's folder
    assert not root.exists(abandoned)
    root.write(f"{folder}/table/part-0.parquet", b"x")
    entry = convert_cache.remote_publish(root, KEY, folder, rows=1)
    assert convert_cache.remote_lookup(root, KEY) == entry
    # a marker whose folder is gone is stale: removed, not used
    root.delete_dir(folder)
    assert convert_cache.remote_lookup(root, KEY) is None and not root.exists(f"{KEY}.ready")
    convert_cache.release_all()
    _, kept = convert_cache.remote_clear(root)
    assert kept == [] and keys(options, bucket, "killed/") == [f"killed/{ownership.SENTINEL}"]
