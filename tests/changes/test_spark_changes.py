"""Change reads to Spark (issue #35): ``ds.changes(since=v).to_spark()``, with and without select/filter, equal
delta-rs's ``load_cdf`` on a copy of a corpus change-data-feed table, and, on a dal-written table without a change
data feed, the set difference by row id of the two versions as delta-rs reads them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa

import dal
from dal.catalog import Catalog
from tests.changes.helpers import CHANGE_COLUMNS, delta_rs_read, rows
from tests.conformance.conftest import require_corpus


def spark_table(frame: Any) -> pa.Table:
    return pa.Table.from_pandas(frame.toPandas(), preserve_index=False)


def test_a_cdf_table_to_spark_equals_load_cdf(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    shutil.copytree(require_corpus() / "delta-rs/cdf-table", tmp_path / "table")
    catalog = f"sqlite:///{tmp_path}/catalog.db"
    dal.register("t", str(tmp_path / "table"), catalog=catalog, read_only=True)
    versions = sorted(dal.get_catalog(catalog).versions("t"), key=lambda v: v.number)
    number_of = {v.storage_version: v.number for v in versions}
    since = versions[0].number
    ref = pa.table(
        DeltaTable(str(tmp_path / "table"))
        .load_cdf(starting_version=versions[0].storage_version + 1, ending_version=versions[-1].storage_version)
        .read_all()
    )
    mapped = pa.array([number_of[v] for v in ref.column("_commit_version").to_pylist()], pa.int64())
    ref = ref.set_column(ref.column_names.index("_commit_version"), "_commit_version", mapped)
    data = [c for c in ref.column_names if c not in CHANGE_COLUMNS]
    columns = [*data, "_change_type", "_commit_version"]

    scan = dal.open("t", catalog=catalog).changes(since=since)
    got = spark_table(scan.to_spark(spark))
    assert got.num_rows == ref.num_rows > 0
    assert rows(got, columns) == rows(ref, columns)

    # a projection and a filter (on a change column too), as Spark gets them
    picked = scan.select(["id", "_change_type"]).filter("_change_type = 'insert'")
    got = spark_table(picked.to_spark(spark))
    want = ref.filter(pa.compute.equal(ref.column("_change_type").cast(pa.string()), "insert"))
    assert got.column_names == ["id", "_change_type"]
    assert rows(got, ["id", "_change_type"]) == rows(want, ["id", "_change_type"])


def test_a_table_without_cdf_to_spark_is_the_difference_by_id(sqlite_env: Catalog, spark: Any) -> None:
    first = pa.table({"id": list(range(20)), "x": [float(i) for i in range(20)], "p": ["a", "b"] * 10})
    dal.write(first, "sc.chg", partition_by=["p"])
    dal.write(pa.table({"id": [100, 101], "x": [1.5, 2.5], "p": ["a", "b"]}), "sc.chg")
    dal.delete("sc.chg", where="id >= 5 AND id < 9")
    where = sqlite_env.get_dataset("sc.chg").location
    v0 = pa.Table.from_pylist(delta_rs_read(where, 0).to_pylist())  # plain strings (delta-rs: string_view)
    v2 = delta_rs_read(where, 2)
    before, after = set(v0.column("id").to_pylist()), set(v2.column("id").to_pylist())

    got = spark_table(dal.open("sc.chg").changes(since=0).to_spark(spark))
    inserted = {r["id"] for r in got.to_pylist() if r["_change_type"] == "insert"}
    deleted = {r["id"] for r in got.to_pylist() if r["_change_type"] == "delete"}
    assert inserted == after - before == {100, 101}
    assert deleted == before - after == {5, 6, 7, 8}
    assert got.num_rows == 6
    # every column round-trips: the deleted rows as delta-rs read them in version 0
    ref = v0.filter(pa.compute.is_in(v0.column("id"), pa.array([5, 6, 7, 8]))).select(["id", "x", "p"])
    assert rows(got.filter(pa.compute.equal(got.column("_change_type"), "delete")), ["id", "x", "p"]) == rows(
        ref, ["id", "x", "p"]
    )
    filtered = spark_table(dal.open("sc.chg").changes(since=0).filter("id > 50").select(["id"]).to_spark(spark))
    assert sorted(filtered.column("id").to_pylist()) == [100, 101]
