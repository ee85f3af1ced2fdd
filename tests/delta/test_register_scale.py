"""Register and sync in time proportional to the log (issue #34): delta-rs loads the first version described
once, each later version is its commit applied (``dal.formats.delta.replay``), and the result is what loading
every version with delta-rs gives; another writer's row counts are compared with footers up to a budget per
call, the rest when a read plans the file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import dal
from benchmarks.many_files import ROWS, append, make_table
from dal.catalog import Catalog
from dal.errors import FormatError
from dal.formats.delta import replay
from dal.formats.delta.format import DeltaFormat


def _drafts(root: Path, after: int | None = None) -> list[dict[str, Any]]:
    drafts = DeltaFormat().snapshots(str(root), {}, after=after, previous=None)
    return [
        {"v": d.storage_version, "rows": d.row_count, "files": d.file_count, "bytes": d.size_bytes,
         "parts": d.partitions, "op": d.operation, "schema": d.schema, "props": dict(d.properties)}
        for d in drafts
    ]  # fmt: skip


def _history(root: Path) -> None:
    """Appends, removes, a re-added file, typed partitions, a schema change and a delete, by delta-rs."""
    data = pa.table({"id": pa.array(range(12), pa.int64()), "p": [i % 3 for i in range(12)],
                     "flag": [i % 2 == 0 for i in range(12)]})  # fmt: skip
    write_deltalake(str(root), data, partition_by=["p", "flag"])
    for k in range(4):
        write_deltalake(str(root), data.slice(k, 3), partition_by=["p", "flag"], mode="append")
    DeltaTable(str(root)).delete("id = 5")
    write_deltalake(str(root), data.slice(0, 2), partition_by=["p", "flag"], mode="append")
    wider = data.append_column("extra", pa.array([1.5] * 12))
    write_deltalake(str(root), wider, partition_by=["p", "flag"], mode="append", schema_mode="merge")
    DeltaTable(str(root)).optimize.compact()


def test_applied_commits_describe_what_delta_rs_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _history(tmp_path / "t")
    applied = _drafts(tmp_path / "t")
    monkeypatch.setattr(replay.Tally, "applies", lambda self, actions: None)  # every version loaded by delta-rs
    monkeypatch.setattr(replay.Tally, "apply_lines", lambda self, version, lines, budget: False)
    loaded = _drafts(tmp_path / "t")
    assert applied == loaded
    assert [d["v"] for d in applied] == list(range(DeltaTable(str(tmp_path / "t")).version() + 1))
    for d in applied:  # and delta-rs's own count of each version
        table = DeltaTable(str(tmp_path / "t"), version=d["v"])
        assert d["rows"] == table.to_pyarrow_table().num_rows
        assert d["files"] == len(table.file_uris())


def test_a_sync_describes_the_new_commits_from_the_last_one(tmp_path: Path) -> None:
    _history(tmp_path / "t")
    whole = _drafts(tmp_path / "t")
    assert _drafts(tmp_path / "t", after=3) == whole[4:]


def test_delta_rs_loads_one_version_however_many_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """50 commits: one log replay by delta-rs (the first version), not one per version (the old cost: each
    version loaded and its add actions listed, O(versions x files))."""
    make_table(str(tmp_path / "t"), 500, commits=50, parts=7)
    loads: list[object] = []
    real = DeltaTable.load_as_version

    def counted(self: DeltaTable, version: Any) -> None:
        loads.append(version)
        real(self, version)

    monkeypatch.setattr(DeltaTable, "load_as_version", counted)
    adds: list[int] = []
    listed = DeltaTable.get_add_actions
    monkeypatch.setattr(DeltaTable, "get_add_actions", lambda self, *a, **k: adds.append(1) or listed(self, *a, **k))
    drafts = _drafts(tmp_path / "t")
    assert [d["rows"] for d in drafts] == [ROWS * 10 * (k + 1) for k in range(50)]
    assert loads == [] and len(adds) == 1


def test_removes_and_partitions_follow_the_commits(tmp_path: Path) -> None:
    make_table(str(tmp_path / "t"), 40, commits=4, parts=3)
    append(str(tmp_path / "t"), 40, 5, parts=3, removes=range(0, 40, 2))  # half removed, five added
    *_, last = _drafts(tmp_path / "t")
    assert last["files"] == 25 and last["rows"] == 25 * ROWS
    live = [*range(1, 40, 2), *range(40, 45)]
    assert sorted((p.values, p.file_count, p.row_count) for p in last["parts"]) == [
        ((("part", str(k)),), n, n * ROWS) for k in range(3) if (n := sum(i % 3 == k for i in live))
    ]


def _lie(root: Path, version: int, index: int, rows: int) -> None:
    log = root / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    adds = [a for a in actions if "add" in a]
    stats = json.loads(adds[index]["add"]["stats"])
    stats["numRecords"] = rows
    adds[index]["add"]["stats"] = json.dumps(stats)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_footers_beyond_the_budget_are_checked_when_read(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "FOOTER_CHECKS", 3)
    make_table(str(tmp_path / "t"), 10, commits=1, parts=1)
    _lie(tmp_path / "t", 0, 1, ROWS + 1)  # the second file: within the budget
    with pytest.raises(
        FormatError, match=r"the log says .* holds 11 rows \(numRecords\) but its Parquet footer says 10"
    ):
        dal.register("x.early", str(tmp_path / "t"))
    _lie(tmp_path / "t", 0, 1, ROWS)
    _lie(tmp_path / "t", 0, 8, ROWS + 1)  # the ninth: past it, registered; the read that plans it refuses
    dal.register("x.late", str(tmp_path / "t"))
    ds = dal.open("x.late")
    assert ds.version.row_count == 10 * ROWS + 1
    with pytest.raises(FormatError, match="by its Parquet footer but the version says 11"):
        ds.to_arrow()


def test_a_fresh_process_registers_syncs_states_stats_and_heads_without_pandas(
    sqlite_env: Catalog, tmp_path: Path
) -> None:
    """Register, a sync and ``dal stats`` of a many-file table cost the log, not imports: pyarrow imports pandas
    (~0.25-0.4 s CPU) on its first conversion of a Python value (``pa.array``, ``pa.scalar``, a Python literal
    given to a compute function), ``to_numpy`` and ``group_by``, and delta-rs's own load needs none of them
    (``dal.formats.arrays``). Commits of 150 adds each, so their adds are read as columns; partitions, so
    their totals are summed."""
    import subprocess
    import sys

    root = tmp_path / "t"
    make_table(str(root), 600, commits=4, parts=5)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    modules = "print(sorted(m for m in ('pandas', 'pyarrow.dataset') if m in sys.modules))\n"

    def fresh(code: str) -> str:
        out = subprocess.run([sys.executable, "-c", "import sys, dal\n" + code + modules], capture_output=True,
                             text=True, timeout=300, env=env)  # fmt: skip
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert fresh(f"assert len(dal.register('c.many', {str(root)!r}, format='delta')) == 4\n") == "[]"
    append(str(root), 600, 150, parts=5)  # another writer's commit (this process: its imports are its own)
    code = (
        "from dal.ops import lifecycle\ndal.sync('c.many')\ns = lifecycle.stats('c.many')\nassert s.files == 750, s\n"
    )
    assert fresh(code) == "[]"
    assert [v.row_count for v in sqlite_env.versions("c.many")] == [1500, 3000, 4500, 6000, 7500]
    # dal head: the first file through pyarrow.parquet (Query.read_file), its partition value typed from arrays
    code = "from dal.ops import lifecycle\n_, rows = lifecycle.head('c.many', n=3)\nprint(rows)\n"
    shown, imported = fresh(code).splitlines()
    assert imported == "[]"
    assert shown == str(dal.open("c.many").to_arrow().slice(0, 3).to_pylist())


def test_the_table_listing_is_what_os_walk_lists(tmp_path: Path) -> None:
    """``_local_files`` (one scandir per folder, paths made from the parent's) lists what ``os.walk`` with
    links followed did: nested folders, a link to a folder outside (followed), links to a file and to nothing
    (listed as files), names with spaces and '%'."""
    from dal.formats.delta.format import _local_files

    root, outside = tmp_path / "t", tmp_path / "outside"
    for rel in ("a.parquet", "p=1/b.parquet", "p=1/q=x y/c%20.parquet", "p=2/deep/er/d.parquet", "_delta_log/0.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "e.parquet").write_bytes(b"x")
    (root / "p=3").symlink_to(outside, target_is_directory=True)
    (root / "f.parquet").symlink_to(root / "a.parquet")
    (root / "dangling.parquet").symlink_to(tmp_path / "nothing")
    (root / "empty").mkdir()
    walked = set()
    for folder, _dirs, names in os.walk(root, followlinks=True):
        rel = os.path.relpath(folder, root)
        walked.update(("" if rel == "." else rel.replace(os.sep, "/") + "/") + n for n in names)
    assert _local_files(str(root)) == walked
    assert "p=3/sub/e.parquet" in walked and "dangling.parquet" in walked and "p=1/q=x y/c%20.parquet" in walked


def _edit_last(root: Path, edit: Any) -> None:
    """Rewrite the newest commit's add actions with ``edit(index, add)``."""
    log = sorted((root / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    adds = [a["add"] for a in actions if "add" in a]
    for i, add in enumerate(adds):
        edit(i, add)
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_a_sync_applies_a_large_commit_of_new_files_as_columns(
    sqlite_env: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync applies its commits to the catalog's record of the last version (a seeded tally); a commit of 100
    adds or more of new files is read as columns there too (one action at a time: 15.9 s for one commit of
    200,000 adds, delta-rs's load 0.9 s). What a seeded tally cannot take so goes one action at a time or to
    delta-rs: removes, a re-add (``dataChange: false``), a NULL or missing partition value. Each version as a
    fresh replay (delta-rs's load of the first, every later commit applied) and delta-rs itself describe it."""
    root = tmp_path / "t"
    make_table(str(root), 300, commits=3, parts=5)
    dal.register("c.sync", str(root), format="delta")
    taken: list[tuple[int, bool, bool]] = []
    real = replay.Tally.apply_lines

    def counted(self: replay.Tally, version: int, lines: Any, budget: Any) -> bool:
        took = real(self, version, lines, budget)
        taken.append((version, self.seeded is not None, took))
        return took

    monkeypatch.setattr(replay.Tally, "apply_lines", counted)
    append(str(root), 300, 150, parts=5)  # new files: columns
    dal.sync("c.sync")
    append(str(root), 450, 120, parts=5, removes=range(0, 300, 3))  # removes: not as columns
    append(str(root), 570, 110, parts=5)
    _edit_last(root, lambda i, a: a.update(path="part=0/f-0000300.parquet", dataChange=False) if i == 0 else None)
    dal.sync("c.sync")
    append(str(root), 680, 130, parts=5)
    _edit_last(root, lambda i, a: a.update(partitionValues={}) if i == 5 else None)  # a key missing: NULL
    dal.sync("c.sync")
    # 4: its removes name no size (delta-rs loads it; 5 then applies to that load, unseeded); 6: a NULL value
    assert taken == [(3, True, True), (4, True, False), (5, False, True), (6, True, False)]
    recorded = sqlite_env.versions("c.sync")
    fresh = _drafts(root)
    assert [(v.row_count, v.file_count, v.size_bytes) for v in recorded] == [
        (d["rows"], d["files"], d["bytes"]) for d in fresh
    ]
    assert [set(sqlite_env.partitions("c.sync", v.number)) for v in recorded] == [set(d["parts"]) for d in fresh]
    for v in recorded[3:]:  # and delta-rs's own count of each synced version
        table = DeltaTable(str(root), version=v.storage_version)
        assert v.file_count == len(table.file_uris()) and v.row_count == table.to_pyarrow_table().num_rows
