"""Any fsspec URL: datasets on ``memory://`` (fsspec's in-process store), and the one atomic step every
backend must offer — create-if-absent — on local disk, fsspec memory, S3 and Azure."""

from __future__ import annotations

import uuid
from pathlib import Path

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog
from dal.storage.location import Location
from tests.petastorm.test_petastorm_dataset import SCHEMA, frames


@pytest.fixture
def memory_root() -> str:
    return f"memory://dal-{uuid.uuid4().hex[:8]}"


def test_petastorm_datasets_on_memory(sqlite_env: Catalog, memory_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAL_WAREHOUSE", f"{memory_root}/wh")
    dal.write(frames(6), "mem.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"])
    v1 = dal.write(frames(2, 50), "mem.frames", format="petastorm")
    assert (v1.number, v1.row_count) == (1, 8)
    assert sqlite_env.get_dataset("mem.frames").location == f"{memory_root}/wh/mem.frames"
    got = dal.open("mem.frames", 0).to_numpy()
    assert sorted(got["id"].tolist()) == list(range(6)) and got["rgb"].shape == (6, 6, 8, 3)
    scan = dal.open("mem.frames").filter("id >= 2").select("id", "depth")
    shards = [scan.shard(r, 2, "keep").to_numpy()["id"].tolist() for r in range(2)]
    assert sorted(shards[0] + shards[1]) == [2, 3, 4, 5, 50, 51]
    fs = fsspec.filesystem("memory")
    records = fs.ls(f"{memory_root.removeprefix('memory://')}/wh/mem.frames/_dal_versions", detail=False)
    assert [r.rsplit("/", 1)[1] for r in sorted(records)] == [f"{n:020d}.json" for n in range(2)]


def test_plain_parquet_on_memory_and_delta_refused_there(
    sqlite_env: Catalog, memory_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fs = fsspec.filesystem("memory")
    root = f"{memory_root.removeprefix('memory://')}/plain"
    for day, n in (("2026-01-01", 3), ("2026-01-02", 2)):
        with fs.open(f"{root}/day={day}/part-0.parquet", "wb") as f:
            pq.write_table(pa.table({"v": np.arange(n)}), f)
    (v,) = dal.register("mem.plain", f"{memory_root}/plain", format="parquet")
    assert (v.row_count, v.partition_columns) == (5, ("day",))
    assert sorted(dal.open("mem.plain").filter("day = '2026-01-01'").to_arrow().column("v").to_pylist()) == [0, 1, 2]
    with pytest.raises(dal.DalError, match=r"Delta tables cannot live on memory://"):
        dal.register("mem.delta", f"{memory_root}/delta")
    with pytest.raises(dal.DalError, match=r"Delta tables cannot live on memory://"):
        monkeypatch.setenv("DAL_WAREHOUSE", f"{memory_root}/wh")
        dal.write(pa.table({"a": [1]}), "mem.delta2")
    assert [d.name for d in sqlite_env.list_datasets()] == ["mem.plain"]


@pytest.fixture(params=["local", "memory", "s3", "azure"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    if request.param == "local":
        return Location.of(str(tmp_path / "loc"))
    if request.param == "memory":
        return Location.of(f"memory://loc-{uuid.uuid4().hex[:8]}")
    if request.param == "azure":
        container, az_options = request.getfixturevalue("azure")
        return Location.of(f"az://{container}/loc", az_options)
    bucket, options = request.getfixturevalue("s3")
    return Location.of(f"s3://{bucket}/loc", options)


def test_create_if_absent_is_atomic_and_keeps_the_first(location: Location) -> None:
    assert location.create_exclusive("_dal_versions/0.json", b"first") is True
    assert location.create_exclusive("_dal_versions/0.json", b"second") is False
    assert location.read("_dal_versions/0.json") == b"first"
    location.write("a/b/c.bin", b"xyz")
    location.copy("a/b/c.bin", "d/c.bin")
    location.move("d/c.bin", "e/c.bin")
    listed = dict(location.list())
    assert listed == {"_dal_versions/0.json": 5, "a/b/c.bin": 3, "e/c.bin": 3}
    location.delete_dir("a")
    assert not location.exists("a/b/c.bin") and location.read("e/c.bin") == b"xyz"


def test_hadoop_urls_for_spark_and_hive() -> None:
    from dal.storage import uris

    assert uris.to_uri("/data/x=1/p.parquet") == "file:///data/x=1/p.parquet"
    assert uris.to_uri("s3://b/wh/t") == "s3a://b/wh/t"
    assert (
        uris.to_uri("az://c/wh/t", {"AZURE_STORAGE_ACCOUNT_NAME": "acct"}) == "abfss://c@acct.dfs.core.windows.net/wh/t"
    )
    assert uris.to_uri("abfss://c@acct.dfs.core.windows.net/t") == "abfss://c@acct.dfs.core.windows.net/t"
    assert uris.to_uri("gs://b/t") == "gs://b/t"
    assert uris.url("s3://b/wh/t") == "s3://b/wh/t" and uris.url("/data/t") == "file:///data/t"
