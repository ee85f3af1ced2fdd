"""The plan is plain values: it pickles (a unit read in another process gives the same rows), and a format that
cannot tell what changed says so."""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.errors import ChangesUnavailable
from dal.formats.changes import ChangePlan, Unit
from dal.read.changes import plan_changes, read_unit
from tests.changes.helpers import changes


def _read(plan: ChangePlan, unit: Unit) -> pa.Table:
    return read_unit(plan, unit, {})


def test_a_plan_pickles_and_its_units_read_in_another_process(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "d")
    dal.write(pa.table({"id": list(range(10)), "k": ["a", "b"] * 5}), "d", path=path, partition_by=["k"],
              catalog=catalog)  # fmt: skip
    dal.write(pa.table({"id": [10, 11], "k": ["a", "c"]}), "d", catalog=catalog)
    DeltaTable(path).delete("id < 3")
    dal.sync("d", catalog=catalog)
    cat = dal.get_catalog(catalog)
    plan = plan_changes(cat.get_dataset("d"), cat.versions("d"), None)
    assert pickle.loads(pickle.dumps(plan)) == plan
    with ProcessPoolExecutor(1) as pool:
        remote = list(pool.map(_read, [plan] * len(plan.units), plan.units))
    assert pa.concat_tables(remote).equals(changes("d", catalog, None))


def test_a_plain_parquet_dataset_cannot_say_what_changed(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    pq.write_table(pa.table({"v": [1, 2]}), plain / "part-0.parquet")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("p", str(plain), format="parquet", catalog=catalog)
    with pytest.raises(ChangesUnavailable, match="parquet dataset"):
        changes("p", catalog, None)


def test_a_catalog_version_spanning_several_delta_commits_labels_them_all_with_its_number(tmp_path: Path) -> None:
    """Versions recorded from another log can skip Delta commits: the next recorded version covers them."""
    from dal.formats.registry import get_format

    catalog, path = f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "d")
    for ids in ([0, 1], [2], [3, 4]):
        dal.write(pa.table({"id": ids}), "d", path=path, catalog=catalog)
    cat = dal.get_catalog(catalog)
    v0, _, v2 = sorted(cat.versions("d"), key=lambda v: v.number)
    plan = get_format("delta").changes(path, {}, [v2], v0)  # as if Delta commit 1 had no catalog version
    got = pa.concat_tables([read_unit(plan, u, {}) for u in plan.units])
    assert got.column("id").to_pylist() == [2, 3, 4]
    assert set(got.column("_commit_version").to_pylist()) == {2}
    assert set(got.column("_commit_timestamp").to_pylist()) == {v2.created_at}
