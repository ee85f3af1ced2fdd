"""scan.to_ray against independent references: pyarrow/pandas reading the raw Parquet files of a partitioned
Delta table (with and without filters), delta-rs for a table with deletion vectors, and Ray's processes
gone after shutdown. One local Ray (one CPU, no dashboard) for the module."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
import ray

import dal
from dal.catalog import Catalog
from dal.errors import MissingDependency
from tests.conformance.conftest import require_corpus
from tests.test_layers import uninstall

N = 600


def _table(start: int, n: int) -> pa.Table:
    ids = range(start, start + n)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([i * 0.5 for i in ids], pa.float64()),
            "station": pa.array([["YUL", "YYZ", "YVR"][i % 3] for i in ids]),
            "day": pa.array([f"2026-01-0{1 + i % 4}" for i in ids]),
        }
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    node = ray._private.worker._global_node
    pids = [p.process.pid for procs in node.all_processes.values() for p in procs]
    assert pids
    try:
        yield
    finally:
        ray.shutdown()
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in pids if _alive(p)], "Ray left processes behind after shutdown"


@pytest.fixture
def delta_table(local_ray: None, sqlite_env: Catalog, tmp_path: Path) -> Path:
    """A Delta table partitioned by day: version 0 has ids 0..299, version 1 appends 300..599."""
    path = tmp_path / "ds"
    dal.write(_table(0, 300), "t.ray", partition_by=["day"], path=str(path))
    dal.write(_table(300, 300), "t.ray")
    return path


def _raw(path: Path, version: int) -> pa.Table:
    """The rows of a Delta version, read by pyarrow from the files delta-rs lists (dal is not involved)."""
    from deltalake import DeltaTable

    files = [str(path / f) for f in DeltaTable(str(path), version=version).file_uris()]
    ds = pads.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(path))
    return ds.to_table()


def _rows(t: pa.Table, columns: list[str]) -> list[tuple[object, ...]]:
    d = t.select(columns).to_pydict()
    return sorted(zip(*(d[c] for c in columns), strict=True))


def test_whole_version_and_pinned_version_match_pyarrow(delta_table: Path) -> None:
    ds = dal.open("t.ray").scan().to_ray()
    assert isinstance(ds, ray.data.Dataset)
    cols = ["id", "x", "station", "day"]
    got = pa.Table.from_pandas(ds.to_pandas(), preserve_index=False)
    assert got.column_names == cols and got.schema.field("day").type == pa.string()
    want = _raw(delta_table, 1)
    assert _rows(got, cols) == _rows(want.cast(got.select(cols).schema), cols) and got.num_rows == N
    v0 = dal.open("t.ray", 0).scan().to_ray()
    assert sorted(v0.to_pandas()["id"].tolist()) == list(range(300))  # the pinned version's files only


def test_projection_and_filters_pushed_down(delta_table: Path) -> None:
    ref = _raw(delta_table, 1).to_pandas()
    want = ref[(ref.station == "YUL") & (ref.day == "2026-01-02") & (ref.x >= 50)]
    scan = dal.open("t.ray").scan().select("id", "x").filter("station = 'YUL' AND day = '2026-01-02'")
    assert len(scan.plan()) == 2  # one file per version of the one partition: the others are pruned
    ds = scan.to_ray()
    assert ds.schema().names == ["id", "x"]
    got = ds.filter(expr="x >= 50").to_pandas()  # Ray's own filter, on the rows dal read
    assert sorted(got["id"].tolist()) == sorted(want.id.tolist()) and len(want) > 0
    # Ray's projection is pushed into the scan: only that column comes back, in every block
    only = dal.open("t.ray").scan().to_ray().select_columns(["station"])
    counts = only.to_pandas()["station"].value_counts().to_dict()
    assert counts == ref.station.value_counts().to_dict()
    assert dal.open("t.ray").scan().filter("day = '2026-01-03'").to_ray().count() == int(
        (ref.day == "2026-01-03").sum()
    )
    # the filtered read is in the read log, for the model's lineage
    assert any(r.dataset == "t.ray" and r.filters and "2026-01-03" in r.filters for r in dal.read_log())


def test_blocks_follow_the_plan_and_an_empty_result_keeps_its_schema(delta_table: Path) -> None:
    scan = dal.open("t.ray").scan()
    ds = scan.to_ray(override_num_blocks=4)
    assert sum(ds.to_pandas()["id"].tolist()) == sum(range(N))
    empty = scan.filter("station = 'nowhere'").select("id", "day").to_ray()
    assert empty.count() == 0 and empty.schema().names == ["id", "day"]


def test_deletion_vectors_do_not_come_back(local_ray: None, sqlite_env: Catalog, tmp_path: Path) -> None:
    from deltalake import DeltaTable, QueryBuilder

    shutil.copytree(require_corpus() / "delta-rs" / "table-with-dv-small", tmp_path / "dv")
    delta = DeltaTable(str(tmp_path / "dv"))  # delta-rs applies the deletion vectors itself
    want = sorted(
        pa.table(QueryBuilder().register("t", delta).execute("select value from t").read_all())["value"].to_pylist()
    )
    raw = pads.dataset(str(tmp_path / "dv"), format="parquet", exclude_invalid_files=True).count_rows()
    assert raw > len(want)  # the file still holds the deleted rows
    dal.register("t.dv", str(tmp_path / "dv"))
    got = dal.open("t.dv").scan().to_ray().to_pandas()
    assert sorted(got["value"].tolist()) == want


def test_missing_extra_names_the_pip_command(delta_table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scan = dal.open("t.ray").scan()
    uninstall(monkeypatch, "ray")
    with pytest.raises(MissingDependency, match=r"pip install 'dal-catalog\[ray\]'"):
        scan.to_ray()


def test_fixed_shape_columns_are_one_array_per_batch_and_nulls_are_refused(
    local_ray: None, sqlite_env: Catalog
) -> None:
    """Issue 37: an embedding (FixedSizeList<float32>[8]) is a (rows, 8) array in Ray's numpy batches, not an
    object array of lists; a null cell is refused by name (Ray's numpy batches have no value for it)."""
    import numpy as np

    vectors = np.arange(40 * 8, dtype=np.float32).reshape(40, 8) / 7
    embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), 8)
    dal.write(pa.table({"id": pa.array(range(40), pa.int64()), "embedding": embedding}), "t.emb")
    ds = dal.open("t.emb").to_ray()
    batch = next(iter(ds.iter_batches(batch_size=40, batch_format="numpy")))
    assert batch["embedding"].dtype == np.float32 and batch["embedding"].shape == (40, 8)
    assert batch["embedding"].tobytes() == vectors[batch["id"]].tobytes()
    assert ds.select_columns(["embedding"]).count() == 40
    with_null = pa.array([[1.0] * 8, None], pa.list_(pa.float32(), 8))
    dal.write(pa.table({"id": pa.array([0, 1], pa.int64()), "embedding": with_null}), "t.emb_null")
    with pytest.raises(Exception, match=r"column 'embedding' of t.emb_null holds nulls.*IS NOT NULL"):
        dal.open("t.emb_null").to_ray().take_all()
