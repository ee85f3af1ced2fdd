"""A table with the change data feed on, written by dal and changed by delta-rs (deletes and updates write
``_change_data`` files): the change read equals delta-rs's ``load_cdf`` from every version, and equals the
multiset difference of delta-rs's reads of consecutive versions once update images are counted as the delete
and insert they are."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import dal
from tests.changes.helpers import changes, delta_rs_read, rows


def _table(ids: range, part: str) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "part": [part] * len(ids),
                     "x": pa.array([float(i) for i in ids])})  # fmt: skip


def test_a_feed_written_by_delta_rs_equals_load_cdf(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    path, catalog = str(tmp_path / "d"), f"sqlite:///{tmp_path}/catalog.db"
    write_deltalake(path, _table(range(6), "a"), partition_by=["part"],
                    configuration={"delta.enableChangeDataFeed": "true"})  # fmt: skip
    dal.register("d", path, catalog=catalog)
    dal.write(_table(range(6, 10), "b"), "d", catalog=catalog)
    DeltaTable(path).delete("id % 3 = 0")
    DeltaTable(path).update(updates={"x": "x + 100"}, predicate="id > 6")
    write_deltalake(path, _table(range(20, 22), "a"), mode="append")
    dal.sync("d", catalog=catalog)
    versions = sorted(dal.get_catalog(catalog).versions("d"), key=lambda v: v.number)
    assert [v.storage_version for v in versions] == list(range(5))
    assert any(Path(path, "_change_data").rglob("*.parquet"))  # delta-rs wrote change data files
    columns = ["id", "part", "x", "_change_type", "_commit_version"]
    for since in [None, *[v.number for v in versions[:-1]]]:
        start = 0 if since is None else since + 1  # catalog versions are Delta versions here
        ref = pa.table(DeltaTable(path).load_cdf(starting_version=start).read_all())
        assert rows(changes("d", catalog, since), columns) == rows(ref, columns), f"since {since}"
    # an update is its preimage (a delete) and its postimage (an insert): the difference of the two versions
    for before, after in itertools.pairwise(versions):
        got = changes("d", catalog, before.number, after.number)
        kinds = got.column("_change_type")
        gone = pc.is_in(kinds, pa.array(["delete", "update_preimage"]))
        came = pc.is_in(kinds, pa.array(["insert", "update_postimage"]))
        data = ["id", "part", "x"]
        old = rows(delta_rs_read(path, before.storage_version), data)  # type: ignore[arg-type]
        new = rows(delta_rs_read(path, after.storage_version), data)  # type: ignore[arg-type]
        assert rows(got.filter(gone), data) == old - new
        assert rows(got.filter(came), data) == new - old
    assert set(changes("d", catalog, None).column("_change_type").to_pylist()) == {
        "insert", "delete", "update_preimage", "update_postimage"}  # fmt: skip
