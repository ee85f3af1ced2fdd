"""dal gc on Delta beyond data files: log entries (commits, checksums, checkpoints) of versions before the oldest
kept one go once older than the table's log retention (delta-rs's cleanup_metadata rule, 30 days by default), a
checkpoint at the oldest kept version is written first when needed, and deletion vector files no kept version
needs go (delta-rs's vacuum leaves them). Every kept version is checked against delta-rs reading it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

import dal
from dal import lifecycle
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError
from dal.formats.delta.gc import log_retention_s
from dal.formats.delta.log import deletion_vector_path
from tests.conformance.conftest import require_corpus

DAY = 86400


def table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "city": [f"c{i % 3}" for i in range(n)]})


def log_names(location: str) -> set[str]:
    return {p.name for p in Path(location, "_delta_log").iterdir()}


def age(paths: list[Path], seconds: float) -> None:
    then = time.time() - seconds
    for p in paths:
        os.utime(p, (then, then))


def by_delta_rs(location: str, version: int) -> list[tuple[object, ...]]:
    """A version's rows as delta-rs reads them (dal not involved), sorted."""
    from deltalake import QueryBuilder  # delta-rs's query engine applies deletion vectors

    t = pa.table(
        QueryBuilder().register("t", DeltaTable(location, version=version)).execute("select * from t").read_all()
    )
    d = t.to_pydict()
    return sorted(zip(*d.values(), strict=True))


def by_dal(name: str, version: int) -> list[tuple[object, ...]]:
    d = dal.open(name, version).to_arrow().to_pydict()
    return sorted(zip(*d.values(), strict=True))


def test_log_entries_of_expired_versions_go_after_the_retention(cat: Catalog, tmp_path: Path) -> None:
    for i in range(6):
        dal.write(table(3 + i, 100 * i), "g.l", mode="overwrite" if i else "append")
    cat.tag("g.l", 2, "paper")
    location = cat.get_dataset("g.l").location
    log = Path(location, "_delta_log")
    expected = {v: by_dal("g.l", v) for v in (2, 4, 5)}

    # younger than the default 30 days: the log stays whole (data files of expired versions go as before)
    young = lifecycle.gc("g.l", keep_last=2, dry_run=True)
    assert young.expired == (0, 1, 3) and not [r for r in young.deleted if r.startswith("_delta_log/")]

    age(list(log.iterdir()), 40 * DAY)
    before = log_names(location)
    plan = lifecycle.gc("g.l", keep_last=2, dry_run=True)
    assert sorted(r for r in plan.deleted if r.startswith("_delta_log/")) == [
        "_delta_log/00000000000000000000.json",
        "_delta_log/00000000000000000001.json",
    ]
    assert log_names(location) == before  # a dry run writes no checkpoint and deletes nothing

    code = CliRunner().invoke(cli, ["--catalog", cat.url, "gc", "g.l", "--keep-last", "2", "--json"])
    assert code.exit_code == 0, code.stderr
    done = json.loads(code.stdout)
    assert sorted(done["deleted_files"]) == sorted(plan.deleted)
    names = log_names(location)
    assert "00000000000000000000.json" not in names and "00000000000000000001.json" not in names
    assert "00000000000000000002.checkpoint.parquet" in names  # written so that version 2 loads without 0 and 1
    for v, rows in expected.items():  # kept versions: delta-rs and dal read exactly what they read before
        assert by_delta_rs(location, v) == rows
        assert by_dal("g.l", v) == rows
    with pytest.raises(Exception, match=r"(?i)log segment|not found|version"):
        DeltaTable(location, version=0)  # gone from the log for every reader, not only dal
    for v in (0, 1, 3):
        with pytest.raises(DalError, match=rf"version {v} .*expired"):
            dal.open("g.l", v)

    # a second gc has nothing left to do; writes and syncs go on
    again = lifecycle.gc("g.l", keep_last=2)
    assert again.expired == () and again.deleted == ()
    assert dal.write(table(1, 900), "g.l").number == 6 and dal.open("g.l").count() == 9

    # another catalog registering the table read-only sees the cleaned-up versions as expired, and says so (one
    # location is one dataset's in a catalog)
    other = f"sqlite:///{tmp_path}/other.db"
    dal.register("g.l2", location, read_only=True, catalog=other)
    listed = Catalog(other).versions("g.l2")
    assert [v.unavailable is not None for v in listed[:2]] == [True, True]
    with pytest.raises(DalError, match="expired"):
        dal.open("g.l2", 0, catalog=other)
    d = dal.open("g.l2", 5, catalog=other).to_arrow().to_pydict()
    assert sorted(zip(*d.values(), strict=True)) == expected[5]


def test_the_table_log_retention_property_is_honoured(cat: Catalog) -> None:
    for i in range(3):
        dal.write(table(2, 10 * i), "g.r", mode="overwrite" if i else "append")
    location = cat.get_dataset("g.r").location
    DeltaTable(location).alter.set_table_properties({"delta.logRetentionDuration": "interval 2 days"})
    dal.sync("g.r")
    log = Path(location, "_delta_log")
    age(list(log.iterdir()), 1 * DAY)  # younger than the table's 2 days
    r = lifecycle.gc("g.r", keep_last=1)
    assert r.expired == (0, 1, 2) and not [x for x in r.deleted if x.startswith("_delta_log/")]
    age(list(log.iterdir()), 3 * DAY)
    r = lifecycle.gc("g.r", keep_last=1)
    gone = sorted(x for x in r.deleted if x.startswith("_delta_log/"))
    assert gone == [f"_delta_log/{v:020d}.json" for v in range(3)]
    assert by_delta_rs(location, 3) == by_dal("g.r", 3) == [(20, "c0"), (21, "c1")]


def test_log_retention_parsing() -> None:
    assert log_retention_s({}) == 30 * DAY
    assert log_retention_s({"delta.logRetentionDuration": "interval 7 days"}) == 7 * DAY
    assert log_retention_s({"delta.logRetentionDuration": "INTERVAL 1 hour"}) == 3600
    assert log_retention_s({"delta.logRetentionDuration": "interval 2 weeks"}) == 14 * DAY
    assert log_retention_s({"delta.logRetentionDuration": "soon"}) is None  # unreadable: no log entry goes


def _writable_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dst


def test_deletion_vectors_no_kept_version_needs(cat: Catalog, tmp_path: Path) -> None:
    """A Databricks table (corpus) whose commits 3 and 4 each replace the one data file's deletion vector;
    checkpoints at 10 and 20."""
    path = _writable_copy(require_corpus() / "delta-rs" / "table_with_deletion_logs", tmp_path / "dv")
    location = str(path)
    old_dv, new_dv = (
        "deletion_vector_8e4ca8be-7615-43cf-bc06-5d131148683f.bin",
        ("deletion_vector_a2084964-69d4-4e1e-95f5-9bbd6571d5c3.bin"),
    )
    # the descriptors in the log name exactly these files
    adds = [
        json.loads(x)["add"] for x in (path / "_delta_log" / f"{4:020d}.json").read_text().splitlines() if '"add"' in x
    ]
    assert [deletion_vector_path(a["deletionVector"]) for a in adds] == [new_dv]
    # delta-rs's own vacuum leaves deletion vector files alone, even with no retention
    vacuumed = DeltaTable(location).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=True)
    assert not [f for f in vacuumed if f.endswith(".bin")]

    dal.register("g.dv", location)
    versions = [v.number for v in cat.versions("g.dv")]
    assert versions == list(range(21))
    want = {v: by_delta_rs(location, v) for v in (3, 18, 19, 20)}
    assert want[3] != want[20]  # version 3 deletes one row, version 4 two

    r = lifecycle.gc("g.dv", keep_last=3)  # kept 18..20, replayed from the checkpoint at 10
    assert r.expired == tuple(range(18)) and r.deleted == (old_dv,)
    assert not (path / old_dv).exists() and (path / new_dv).exists()
    for v in (18, 19, 20):
        assert by_delta_rs(location, v) == want[v] == by_dal("g.dv", v)
    with pytest.raises(DalError, match="expired"):
        dal.open("g.dv", 3)

    # with the log aged past the retention: entries before 20 go, the checkpoint at 20 is the start
    age(list((path / "_delta_log").iterdir()), 40 * DAY)
    r = lifecycle.gc("g.dv", keep_last=1)
    assert r.expired == (18, 19)
    names = log_names(location)
    assert "00000000000000000010.checkpoint.parquet" not in names and "00000000000000000019.json" not in names
    assert {"00000000000000000020.checkpoint.parquet", "00000000000000000020.json", "_last_checkpoint"} <= names
    assert (path / new_dv).exists()  # the kept version needs it
    assert by_delta_rs(location, 20) == want[20] == by_dal("g.dv", 20)
    assert lifecycle.gc("g.dv", keep_last=1).deleted == ()


def test_an_unreferenced_deletion_vector_waits_for_the_safe_age(cat: Catalog, tmp_path: Path) -> None:
    path = _writable_copy(require_corpus() / "delta-rs" / "table-with-dv-small", tmp_path / "small")
    dal.register("g.s", str(path))
    stray = path / "deletion_vector_00000000-0000-0000-0000-000000000000.bin"  # a killed DELETE's, uncommitted
    stray.write_bytes(b"\x00" * 8)
    assert lifecycle.gc("g.s").deleted == ()
    age([stray], 7200)
    assert lifecycle.gc("g.s").deleted == (stray.name,)
    assert by_dal("g.s", 1) == by_delta_rs(str(path), 1)
