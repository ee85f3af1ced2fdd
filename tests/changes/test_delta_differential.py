"""Change reads of dal-written Delta tables without a change data feed, against delta-rs's own reads.

Random histories of appends, full overwrites, dal optimize, schema merges, and deletes, updates and predicate
overwrites made by delta-rs on the table itself (then ``dal.sync``): for each consecutive pair of versions, the
changes equal the multiset difference of the two versions' full rows as delta-rs reads them (row ids are unique
in a version, so this is the set difference by row id, a changed row being its delete and its insert), and
applying every change from the first version on, in order, gives the newest version's rows.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import dal
from dal.formats.changes import DiffUnit, FileChanges
from dal.read.changes import plan_changes
from tests.changes.helpers import changes, delta_rs_read, rows

NAME = "events"


class History:
    """A Delta table dal writes at ``path``, changed at random by dal and by delta-rs."""

    def __init__(self, tmp_path: Path, seed: int) -> None:
        self.path = str(tmp_path / "events")
        self.catalog = f"sqlite:///{tmp_path}/catalog.db"
        self.rng = random.Random(seed)
        self.next_id = 0
        self.has_y = False

    def batch(self, n: int, part: str | None = None) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        cols: dict[str, Any] = {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([part or self.rng.choice("abc") for _ in ids], pa.string()),
            "x": pa.array([self.rng.choice([0.5, 1.5, float(i)]) for i in ids], pa.float64()),
        }
        if self.has_y:
            cols["y"] = pa.array([i * 10 for i in ids], pa.int64())
        return pa.table(cols)

    def write(self, data: pa.Table, **kw: Any) -> None:
        dal.write(data, NAME, path=self.path, catalog=self.catalog, partition_by=["part"], **kw)

    def current(self) -> pa.Table:
        return dal.open(NAME, catalog=self.catalog).to_arrow()

    def step(self) -> str:
        from deltalake import DeltaTable, write_deltalake

        op = self.rng.choice(["append", "append", "overwrite", "delete", "update", "replace", "optimize", "merge"])
        if op == "append":
            self.write(self.batch(self.rng.randint(1, 8)))
        elif op == "overwrite":  # keep some rows as they are, add new ones: kept rows are no change
            kept = self.current()
            kept = kept.take(sorted(self.rng.sample(range(kept.num_rows), kept.num_rows // 2)))
            self.write(pa.concat_tables([kept.select(self.batch(0).column_names), self.batch(3)]), mode="overwrite")
        elif op == "delete":
            DeltaTable(self.path).delete(f"id % {self.rng.randint(2, 5)} = {self.rng.randint(0, 1)}")
        elif op == "update":
            DeltaTable(self.path).update(updates={"x": "x + 100"}, predicate=f"id % {self.rng.randint(2, 4)} = 0")
        elif op == "replace":  # predicate overwrite of one partition
            part = self.rng.choice("abc")
            data = self.batch(self.rng.randint(1, 4), part)
            write_deltalake(self.path, data, mode="overwrite", predicate=f"part = '{part}'")
        elif op == "optimize":  # after an append to every partition: at least two files to compact
            self.write(pa.concat_tables([self.batch(1, p) for p in "abc"]))
            dal.lifecycle.optimize(NAME, catalog=self.catalog)
        else:
            self.has_y = True
            self.write(self.batch(2), schema_mode="merge")
        dal.sync(NAME, catalog=self.catalog)
        return op


def _projected(table: pa.Table, columns: list[str]) -> pa.Table:
    """``table``'s ``columns``, those it lacks (added by a later merge) as nulls."""
    for c in columns:
        if c not in table.column_names:
            table = table.append_column(c, pa.nulls(table.num_rows, pa.int64()))
    return table.select(columns)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_changes_are_the_difference_of_delta_rs_reads(tmp_path: Path, seed: int) -> None:
    h = History(tmp_path, seed)
    h.write(h.batch(10))
    ops = [h.step() for _ in range(10)]
    cat = dal.get_catalog(h.catalog)
    versions = sorted(cat.versions(NAME), key=lambda v: v.number)
    columns = versions[-1].schema.names
    reads = {v.number: _projected(delta_rs_read(h.path, v.storage_version), columns) for v in versions}  # type: ignore[arg-type]
    for before, after in itertools.pairwise(versions):
        got = changes(NAME, h.catalog, before.number, after.number)
        assert got.column_names == [*after.schema.names, "_change_type", "_commit_version", "_commit_timestamp"]
        assert set(got.column("_commit_version").to_pylist()) <= {after.number}
        got = _projected(got, [*columns, "_change_type"])  # rows before a merge: its column null
        old, new = rows(reads[before.number], columns), rows(reads[after.number], columns)
        deletes = got.filter(pa.compute.equal(got.column("_change_type"), "delete"))
        inserts = got.filter(pa.compute.equal(got.column("_change_type"), "insert"))
        assert deletes.num_rows + inserts.num_rows == got.num_rows
        context = f"seed {seed}, version {after.number} ({after.operation}), ops {ops}"
        assert rows(deletes, columns) == old - new, context
        assert rows(inserts, columns) == new - old, context
        if after.operation == "optimize":
            assert got.num_rows == 0
    assert ("optimize" in ops) == any(v.operation == "optimize" for v in versions)
    # every change from the first version on, applied in order to its rows, gives the newest rows
    state = rows(reads[versions[0].number], columns)
    for r in changes(NAME, h.catalog, versions[0].number).to_pylist():
        key = Counter([tuple(r[c] for c in columns)])
        if r["_change_type"] == "delete":
            assert not key - state, f"deleted a row the version did not hold: {r}"
            state -= key
        else:
            state += key
    assert state == rows(reads[versions[-1].number], columns)
    # and from nothing (since None): the newest rows, every one an insert or cancelled by a later delete
    assert len(changes(NAME, h.catalog, None)) >= versions[-1].row_count


def test_appends_are_read_file_by_file_and_an_optimize_reads_nothing(tmp_path: Path) -> None:
    h = History(tmp_path, 0)
    h.write(h.batch(10))
    h.write(h.batch(5))
    dal.lifecycle.optimize(NAME, catalog=h.catalog)
    cat = dal.get_catalog(h.catalog)
    info, versions = cat.get_dataset(NAME), cat.versions(NAME)
    appended = plan_changes(info, versions, 0, 1)
    added = {f.uri for f in dal.open(NAME, 1, catalog=h.catalog).files()} - {
        f.uri for f in dal.open(NAME, 0, catalog=h.catalog).files()
    }
    assert all(isinstance(u, FileChanges) and u.change_type == "insert" for u in appended.units)
    assert appended.files_read == len(added) >= 1
    assert plan_changes(info, versions, 1, 2).units == ()  # optimize: dataChange=false
    assert changes(NAME, h.catalog, 1, 1).num_rows == 0


def test_a_copy_on_write_delete_reports_only_the_deleted_rows(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    h = History(tmp_path, 0)
    h.write(h.batch(20, "a"))
    DeltaTable(h.path).delete("id = 7")
    dal.sync(NAME, catalog=h.catalog)
    cat = dal.get_catalog(h.catalog)
    plan = plan_changes(cat.get_dataset(NAME), cat.versions(NAME), 0, 1)
    assert [type(u) for u in plan.units] == [DiffUnit]
    got = changes(NAME, h.catalog, 0)
    assert got.column("id").to_pylist() == [7]
    assert got.column("_change_type").to_pylist() == ["delete"]


def test_an_overwrite_is_diffed_partition_by_partition(tmp_path: Path) -> None:
    """A full overwrite: partition a kept as it was, b changed, c dropped, d new. Only a and b read both
    sides; c is its files' rows as deletes, d as inserts; a reports nothing."""
    h = History(tmp_path, 0)
    first = pa.concat_tables([h.batch(3, "a"), h.batch(3, "b"), h.batch(2, "c")])
    h.write(first)
    kept = first.filter(pa.compute.equal(first.column("part"), "a"))
    b = first.filter(pa.compute.equal(first.column("part"), "b")).slice(1)
    h.write(pa.concat_tables([kept, b, h.batch(2, "d")]), mode="overwrite")
    cat = dal.get_catalog(h.catalog)
    plan = plan_changes(cat.get_dataset(NAME), cat.versions(NAME), 0, 1)
    diffs = [u for u in plan.units if isinstance(u, DiffUnit)]
    assert {f.partition_values for u in diffs for f in (*u.removed, *u.added)} == {(("part", "a"),), (("part", "b"),)}
    whole = {(u.file.partition_values, u.change_type) for u in plan.units if isinstance(u, FileChanges)}
    assert whole == {((("part", "c"),), "delete"), ((("part", "d"),), "insert")}
    got = changes(NAME, h.catalog, 0)
    by_kind = sorted(zip(got.column("_change_type").to_pylist(), got.column("part").to_pylist(), strict=True))
    assert by_kind == [("delete", "b"), ("delete", "c"), ("delete", "c"), ("insert", "d"), ("insert", "d")]
