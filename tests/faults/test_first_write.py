"""First writes of a new dataset: race-safe between processes, and self-healing when killed between the
storage commit and the catalog insert (the next write or ``sync`` records the commit)."""

from __future__ import annotations

import multiprocessing as mp
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog, DatasetNotFound
from dal.errors import DatasetExists, SchemaMismatch
from tests.faults.conftest import finish, run_until_paused, start_paused

ROUNDS = 3
SCHEMA = TensorSchema("Frames", [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("depth", np.float32, (2, 2), NdarrayCodec()),
])  # fmt: skip


def _first_writer(url: str, warehouse: str, fmt: str, writer: int, barrier: Any, out: Any) -> None:
    os.environ["DAL_CATALOG_URL"] = url
    os.environ["DAL_WAREHOUSE"] = warehouse
    ids = [writer * 100 + k for k in range(5)]
    for r in range(ROUNDS):
        barrier.wait(timeout=120)  # both processes make the first write of race.ds<r> at the same instant
        try:
            if fmt == "delta":
                v = dal.write(pa.table({"id": ids}), f"race.ds{r}")
            else:
                rows = [{"id": i, "depth": np.zeros((2, 2), np.float32)} for i in ids]
                v = dal.write(rows, f"race.ds{r}", format="petastorm", schema=SCHEMA)
            out.put((r, writer, v.number, ""))
        except Exception as e:  # reported, so the test shows what went wrong
            out.put((r, writer, -1, f"{type(e).__name__}: {e}"))


@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_two_processes_making_the_first_write_both_land(cat: Catalog, fmt: str) -> None:
    ctx = mp.get_context("spawn")
    out, barrier = ctx.Queue(), ctx.Barrier(2)
    env = (os.environ["DAL_CATALOG_URL"], os.environ["DAL_WAREHOUSE"])
    procs = [ctx.Process(target=_first_writer, args=(*env, fmt, w, barrier, out)) for w in (1, 2)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=240) for _ in range(2 * ROUNDS))
    for p in procs:
        p.join(timeout=60)
    assert [err for *_, err in results] == [""] * (2 * ROUNDS), results
    for r in range(ROUNDS):
        name = f"race.ds{r}"
        assert sorted(n for rr, _, n, _ in results if rr == r) == [0, 1]
        got = dal.open(name).to_numpy(["id"])["id"] if fmt == "petastorm" else dal.open(name).to_arrow()["id"]
        assert sorted(int(i) for i in got) == [100, 101, 102, 103, 104, 200, 201, 202, 203, 204]
        assert [v.number for v in cat.versions(name)] == [0, 1]


def test_first_write_landing_between_anothers_storage_commit_and_catalog_insert(cat: Catalog, tmp_path: Path) -> None:
    """The interleaving that made the second first-writer fail with DatasetExists, made deterministic."""
    code = "import pyarrow as pa, dal; print(dal.write(pa.table({'id': [1, 2, 3]}), 'heal.ds').number)"
    proc, release = start_paused(code, "after-storage-commit", tmp_path)
    try:
        mine = dal.write(pa.table({"id": [4]}), "heal.ds")  # today: DatasetExists … adopt it first
    finally:
        theirs = finish(proc, release)
    assert sorted([mine.number, int(theirs.strip().splitlines()[-1])]) == [0, 1]
    assert [v.storage_version for v in cat.versions("heal.ds")] == [0, 1]
    assert sorted(dal.open("heal.ds").to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]


FIRST_WRITE = textwrap.dedent(
    """
    import pyarrow as pa, dal
    dal.write(pa.table({"id": [1, 2, 3]}), "heal.ds", description="first")
    """
)


def test_first_write_killed_before_the_catalog_insert_is_recorded_by_the_next_write(
    cat: Catalog, tmp_path: Path
) -> None:
    run_until_paused(FIRST_WRITE, "after-storage-commit", tmp_path)
    with pytest.raises(DatasetNotFound):
        cat.get_dataset("heal.ds")
    v = dal.write(pa.table({"id": [4]}), "heal.ds")  # today: DatasetExists … adopt it first with dal.register
    assert [x.storage_version for x in cat.versions("heal.ds")] == [0, 1]
    assert v.number == 1
    assert sorted(dal.open("heal.ds").to_arrow()["id"].to_pylist()) == [1, 2, 3, 4]
    assert sorted(dal.open("heal.ds", 0).to_arrow()["id"].to_pylist()) == [1, 2, 3]


PETASTORM_FIRST_WRITE = textwrap.dedent(
    """
    import numpy as np, dal
    from tests.faults.test_first_write import SCHEMA
    dal.write([{"id": i, "depth": np.zeros((2, 2), np.float32)} for i in (1, 2, 3)], "heal.ds",
              format="petastorm", schema=SCHEMA)
    """
)


def test_petastorm_first_write_killed_before_the_catalog_insert_is_recorded_by_the_next_write(
    cat: Catalog, tmp_path: Path
) -> None:
    run_until_paused(PETASTORM_FIRST_WRITE, "after-storage-commit", tmp_path)
    with pytest.raises(DatasetNotFound):
        cat.get_dataset("heal.ds")
    dal.write([{"id": 4, "depth": np.zeros((2, 2), np.float32)}], "heal.ds", format="petastorm", schema=SCHEMA)
    assert [x.storage_version for x in cat.versions("heal.ds")] == [0, 1]
    assert sorted(int(i) for i in dal.open("heal.ds").to_numpy(["id"])["id"]) == [1, 2, 3, 4]


def test_an_unrecorded_first_write_is_adopted_before_the_next_write_is_checked(cat: Catalog, tmp_path: Path) -> None:
    """The next write is checked against the adopted version: no version mixing two schemas."""
    run_until_paused(PETASTORM_FIRST_WRITE, "after-storage-commit", tmp_path)
    other = TensorSchema("Frames", [TensorField("id", np.int64, (), ScalarCodec())])
    with pytest.raises(SchemaMismatch, match="removed"):
        dal.write([{"id": 9}], "heal.ds", format="petastorm", schema=other)
    assert [x.storage_version for x in cat.versions("heal.ds")] == [0]  # adopted, nothing else written
    assert sorted(int(i) for i in dal.open("heal.ds").to_numpy(["id"])["id"]) == [1, 2, 3]


def test_first_write_killed_before_the_catalog_insert_is_recorded_by_sync(cat: Catalog, tmp_path: Path) -> None:
    run_until_paused(FIRST_WRITE, "after-storage-commit", tmp_path)
    assert [v.storage_version for v in dal.sync("heal.ds")] == [0]
    assert dal.sync("heal.ds") == []
    assert sorted(dal.open("heal.ds").to_arrow()["id"].to_pylist()) == [1, 2, 3]


def test_a_table_written_for_another_name_is_still_not_adopted(cat: Catalog, tmp_path: Path) -> None:
    run_until_paused(FIRST_WRITE, "after-storage-commit", tmp_path)
    where = str(Path(os.environ["DAL_WAREHOUSE"]) / "heal.ds")
    with pytest.raises(DatasetExists, match="adopt it first with dal.register"):
        dal.write(pa.table({"id": [4]}), "other.ds", path=where)
    with pytest.raises(DatasetNotFound):
        dal.sync("other.ds")
