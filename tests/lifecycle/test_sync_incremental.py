"""A sync applies the new commits to the catalog's record of the last version (issue #34): the versions it records
equal a fresh register's (files, rows, bytes, partitions, schema, operation, time), commit by commit, on real tables
other writers left (removes, a schema change, deletion vectors), and it needs no delta-rs load of the table."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from tests.changes.helpers import delta_rs_read
from tests.changes.helpers import rows as multiset
from tests.conftest import use_catalog

CORPUS = Path("/work/shared/conformance")
TABLES = [
    "delta-rs/cdf-table",  # Spark removes without statistics: delta-rs loads those versions
    "delta-rs/cdf-table-with-cdc-and-dvs",  # 26 versions, deletion vectors, removes with statistics
    "delta-golden/time-travel-schema-changes-b",  # a schema change (mergeSchema), adds without statistics
    "delta-golden/basic-with-inserts-updates",  # an UPDATE
    "delta-golden/dv-partitioned-with-checkpoint",  # partitioned, deletion vectors, a checkpoint
]


def _version_of(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head) if len(head) == 20 and head.isdigit() else None


def copy_upto(src: Path, dst: Path, upto: int | None) -> None:
    """``src`` into ``dst`` (a temporary directory) with only the log entries of versions <= ``upto`` (all when
    None): the table as it was after commit ``upto`` (its later data files are there, unreferenced)."""
    shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("_delta_log"))
    log = dst / "_delta_log"
    log.mkdir(exist_ok=True)
    for entry in sorted((src / "_delta_log").iterdir()):
        v = _version_of(entry.name)
        if entry.is_file() and (upto is None or (v is not None and v <= upto)):
            shutil.copy2(entry, log / entry.name)


def newest(src: Path) -> int:
    return max(v for n in os.listdir(src / "_delta_log") if (v := _version_of(n)) is not None and n.endswith(".json"))


def recorded(cat: Catalog, name: str, root: Path) -> list[tuple[object, ...]]:
    """What the catalog recorded of each version (not its recording time; the table's root, which messages in
    its properties name, as ``<root>``)."""
    located = {k: str(x).replace(str(root), "<root>") for v in cat.versions(name) for k, x in v.properties.items()}
    assert located  # every Delta version records its Delta version
    return [
        (v.number, v.storage_version, v.operation, v.row_count, v.file_count, v.size_bytes, v.schema,
         v.partition_columns, v.created_at, {k: str(x).replace(str(root), "<root>") for k, x in v.properties.items()},
         cat.partitions(name, v.number))
        for v in cat.versions(name)
    ]  # fmt: skip


@pytest.mark.parametrize("table", TABLES)
def test_syncing_commit_by_commit_records_what_a_fresh_register_does(
    table: str, tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = CORPUS / table
    last = newest(src)
    fresh_root, synced_root = tmp_path / "fresh", tmp_path / "synced"
    copy_upto(src, fresh_root, None)
    fresh = Catalog(f"sqlite:///{tmp_path}/fresh.db")
    dal.register("t.fresh", str(fresh_root), format="delta", catalog=fresh)

    cat = use_catalog(sqlite_url, tmp_path, monkeypatch)
    copy_upto(src, synced_root, 0)
    dal.register("t.synced", str(synced_root), format="delta")
    for v in range(1, last + 1):
        copy_upto(src, synced_root, v)  # the next commit lands
        assert [x.storage_version for x in dal.sync("t.synced")] == [v]
    assert recorded(cat, "t.synced", synced_root) == recorded(fresh, "t.fresh", fresh_root)
    # the rows read agree with delta-rs's SQL engine (an independent reference: deletion vectors applied)
    expected = delta_rs_read(fresh_root, last)
    got = dal.open("t.synced").to_arrow()
    assert got.num_rows == expected.num_rows == cat.version("t.synced").row_count
    assert multiset(got, got.column_names) == multiset(expected, got.column_names)
    fresh.close()


def _write(root: Path, frame: pa.Table, mode: str = "append") -> None:
    import deltalake

    if mode == "overwrite":
        deltalake.write_deltalake(str(root), frame, mode="overwrite", partition_by=["part"])
    else:
        deltalake.write_deltalake(str(root), frame, mode="append", partition_by=["part"])


def rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "part": [i % 3 for i in range(n)]})


def delete_partition(root: Path, version: int, value: str, of: list[int]) -> None:
    """Commit ``version`` by hand, as Spark and Databricks write a DELETE of whole files: the removal of the files
    of partition ``part=value`` that commits ``of`` added, each remove carrying its size, partition values and
    statistics (``extendedFileMetadata``)."""
    log = root / "_delta_log"
    lines = [json.dumps({"commitInfo": {"timestamp": 1_800_000_000_000, "operation": "DELETE"}})]
    for v in of:
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            add = json.loads(line).get("add")
            if add and add["partitionValues"] == {"part": value}:
                remove = {k: add[k] for k in ("path", "partitionValues", "size", "stats")}
                lines.append(json.dumps({"remove": {**remove, "deletionTimestamp": 1_800_000_000_000,
                                                    "dataChange": True, "extendedFileMetadata": True}}))  # fmt: skip
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def test_a_sync_of_new_commits_loads_no_earlier_version(any_cat: Catalog, tmp_path: Path) -> None:
    """Appends by delta-rs and a delete, synced with the table's first commit gone: a sync that replayed the log
    could not load any version; applying the new commits to the catalog's record needs only them (SQLite and
    PostgreSQL)."""
    import deltalake

    cat = any_cat

    root = tmp_path / "t"
    _write(root, rows(0, 30), "overwrite")
    dal.register("t.inc", str(root), format="delta")
    _write(root, rows(30, 12))
    _write(root, rows(42, 6))
    delete_partition(root, 3, "1", [0, 1])  # part=1's files of commits 0 and 1: 10 + 4 rows
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    (twin / "_dal_catalog.json").unlink()
    (root / "_delta_log" / f"{0:020d}.json").unlink()  # no delta-rs load of the table can succeed now
    with pytest.raises(Exception):  # delta-rs's own error: it cannot load the table any more
        deltalake.DeltaTable(str(root))
    got = dal.sync("t.inc")
    assert [v.storage_version for v in got] == [1, 2, 3]
    other = Catalog(f"sqlite:///{tmp_path}/other.db")
    dal.register("t.inc", str(twin), format="delta", catalog=other)
    assert recorded(cat, "t.inc", root) == recorded(other, "t.inc", twin)
    assert cat.version("t.inc").row_count == delta_rs_read(twin, 3).num_rows == 30 + 12 + 6 - 14
    assert {p.key: p.file_count for p in cat.partitions("t.inc")} == {"part=0": 3, "part=1": 1, "part=2": 3}
    other.close()


def test_a_commit_the_record_cannot_take_is_loaded_by_delta_rs(cat: Catalog, tmp_path: Path) -> None:
    """delta-rs's DELETE removes files without their statistics: the sync loads that version (and applies the
    append after it to the load), recording what a fresh register does."""
    import deltalake

    root = tmp_path / "t"
    _write(root, rows(0, 30), "overwrite")
    dal.register("t.fall", str(root), format="delta")
    _write(root, rows(30, 12))
    deltalake.DeltaTable(str(root)).delete("part = 1")
    _write(root, rows(42, 6))
    assert [v.storage_version for v in dal.sync("t.fall")] == [1, 2, 3]
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    (twin / "_dal_catalog.json").unlink()
    other = Catalog(f"sqlite:///{tmp_path}/other.db")
    dal.register("t.fall", str(twin), format="delta", catalog=other)
    assert recorded(cat, "t.fall", root) == recorded(other, "t.fall", twin)
    assert cat.version("t.fall").row_count == delta_rs_read(root, 3).num_rows == 30 + 12 - 14 + 6
    other.close()


def test_a_commit_cleaned_from_the_log_is_loaded_from_the_checkpoint(cat: Catalog, tmp_path: Path) -> None:
    """A new commit's file gone, a checkpoint after it (log cleanup): it cannot be applied to the record nor
    loaded (recorded as unavailable), and the next version is loaded by delta-rs, not applied to the record
    (which lacks the cleaned commit's rows)."""
    import deltalake

    root = tmp_path / "t"
    _write(root, rows(0, 30), "overwrite")
    dal.register("t.clean", str(root), format="delta")
    _write(root, rows(30, 12))
    _write(root, rows(42, 6))
    deltalake.DeltaTable(str(root)).create_checkpoint()
    (root / "_delta_log" / f"{1:020d}.json").unlink()
    got = dal.sync("t.clean")
    assert [(v.storage_version, v.unavailable is not None) for v in got] == [(1, True), (2, False)]
    assert got[-1].row_count == delta_rs_read(root, 2).num_rows == 48
    assert got[-1].file_count == len(deltalake.DeltaTable(str(root)).file_uris()) == 9
