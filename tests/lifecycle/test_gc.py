"""dal gc: retention over Delta and Petastorm datasets — expired versions stay listed and say so, tagged ones
are kept, files of kept versions are never touched (a concurrent reader keeps reading), abandoned Petastorm
directories go once old enough, and a second gc is a no-op."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema, lifecycle
from dal.catalog import Catalog
from dal.cli.app import cli
from dal.errors import DalError

SCHEMA = TensorSchema(
    "S", [TensorField("id", np.int64, (), ScalarCodec()), TensorField("x", np.float32, (2, 3), NdarrayCodec())]
)


def table(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64()), "city": [f"c{i % 3}" for i in range(n)]})


def rows(n: int, start: int = 0) -> list[dict[str, object]]:
    return [{"id": i, "x": np.full((2, 3), i, np.float32)} for i in range(start, start + n)]


def run(cat: Catalog, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--catalog", cat.url, *args])
    return r.exit_code, r.stdout, r.stderr


def files_under(root: str) -> set[str]:
    return {str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file()}


def overwrite_history(name: str, n: int) -> None:
    """``n`` versions, each an overwrite: every old version's files are garbage once it expires."""
    for i in range(n):
        dal.write(table(3 + i, 100 * i), name, mode="overwrite" if i else "append")


def test_delta_keep_last_tags_and_second_gc(any_cat: Catalog) -> None:
    overwrite_history("g.d", 5)
    any_cat.tag("g.d", 1, "paper")
    location = any_cat.get_dataset("g.d").location
    expected = {v: dal.open("g.d", v).to_arrow() for v in (1, 3, 4)}

    code, out, err = run(any_cat, "gc", "g.d", "--keep-last", "2", "--dry-run", "--json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["expired_versions"] == [0, 2] and plan["kept_because_tagged"] == [1] and plan["dry_run"]
    assert len(plan["deleted_files"]) == 2
    assert all(v.unavailable is None for v in any_cat.versions("g.d"))  # a dry run changes nothing
    before = files_under(location)

    code, out, err = run(any_cat, "gc", "g.d", "--keep-last", "2", "--json")
    assert code == 0, err
    done = json.loads(out)
    assert done["expired_versions"] == [0, 2] and sorted(done["deleted_files"]) == sorted(plan["deleted_files"])
    assert before - files_under(location) == set(plan["deleted_files"])
    for v, t in expected.items():  # kept versions read exactly as before
        assert dal.open("g.d", v).to_arrow().equals(t)
    with pytest.raises(DalError, match=r"version 2 .*expired by dal gc"):
        dal.open("g.d", 2)
    listing = json.loads(run(any_cat, "versions", "g.d", "--json")[1])
    assert [v["expired"] for v in listing] == [True, False, True, False, False]
    assert "expired" in run(any_cat, "versions", "g.d")[1]

    # a second gc finds nothing to do
    again = json.loads(run(any_cat, "gc", "g.d", "--keep-last", "2", "--json")[1])
    assert again["expired_versions"] == [] and again["deleted_files"] == []

    # --force expires the tagged version too
    forced = lifecycle.gc("g.d", keep_last=2, force=True)
    assert forced.expired == (1,) and len(forced.deleted) == 1
    with pytest.raises(DalError, match="expired"):
        dal.open("g.d", "paper")
    assert dal.open("g.d").count() == 7


def test_delta_appends_share_files(cat: Catalog) -> None:
    for i in range(4):
        dal.write(table(2, 10 * i), "g.a")  # every version needs the files of all earlier ones
    r = lifecycle.gc("g.a", keep_last=1)
    assert r.expired == (0, 1, 2) and r.deleted == ()  # the kept version references every file
    assert dal.open("g.a").count() == 8


def test_older_than(cat: Catalog) -> None:
    overwrite_history("g.o", 3)
    assert lifecycle.gc("g.o", older_than=lifecycle.parse_duration("30d")).expired == ()
    r = lifecycle.gc("g.o", older_than=lifecycle.parse_duration("0s"))
    assert r.expired == (0, 1)  # the newest is always kept
    assert dal.open("g.o").count() == 5


def test_orphans_wait_for_the_safe_age(cat: Catalog) -> None:
    overwrite_history("g.s", 2)
    location = cat.get_dataset("g.s").location
    orphan = Path(location, "part-00000-orphan.parquet")  # as a killed writer leaves it: written, not committed
    orphan.write_bytes(b"PAR1")
    assert lifecycle.gc("g.s").deleted == ()  # younger than the safe age: maybe a write in progress
    old = time.time() - 7200
    os.utime(orphan, (old, old))
    assert lifecycle.gc("g.s").deleted == ("part-00000-orphan.parquet",)
    assert not orphan.exists() and dal.open("g.s").count() == 4 and dal.open("g.s", 0).count() == 3


def test_concurrent_reader_of_a_kept_version(cat: Catalog) -> None:
    overwrite_history("g.c", 6)
    ds = dal.open("g.c", 5)
    expected = ds.to_arrow()
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                got = dal.open("g.c", 5).to_arrow()
                assert got.equals(expected)
                assert sum(b.num_rows for b in ds.iter_batches(batch_size=2)) == expected.num_rows
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        r = lifecycle.gc("g.c", keep_last=1, safe_age=lifecycle.parse_duration("0s"))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    assert r.expired == (0, 1, 2, 3, 4) and len(r.deleted) == 5


def test_petastorm_gc_and_abandoned_directories(any_cat: Catalog) -> None:
    dal.write(rows(3), "g.p", format="petastorm", schema=SCHEMA)
    dal.write(rows(3, 3), "g.p", format="petastorm", tags=["first-six"])
    dal.write(rows(2, 6), "g.p", format="petastorm")
    dal.write(rows(2, 8), "g.p", format="petastorm")
    location = any_cat.get_dataset("g.p").location
    # a writer killed before its commit left a version directory no record names
    abandoned = Path(location, "v9-0123456789ab")
    abandoned.mkdir()
    (abandoned / "part-0.parquet").write_bytes(b"PAR1")
    fresh = Path(location, "v9-ba9876543210")  # a write in progress right now
    fresh.mkdir()
    (fresh / "part-0.parquet").write_bytes(b"PAR1")
    old = time.time() - 7200
    os.utime(abandoned / "part-0.parquet", (old, old))
    v3 = dal.open("g.p", 3).to_numpy()["id"].tolist()
    dirs_before = {p.name for p in Path(location).iterdir()}

    code, out, err = run(any_cat, "gc", "g.p", "--keep-last", "1", "--json")
    assert code == 0, err
    r = json.loads(out)
    assert r["expired_versions"] == [0, 2] and r["kept_because_tagged"] == [1]
    gone = dirs_before - {p.name for p in Path(location).iterdir()}
    assert abandoned.name in gone and fresh.exists()
    assert len([d for d in gone if d.startswith(("v0-", "v2-"))]) == 2
    assert dal.open("g.p", 3).to_numpy()["id"].tolist() == v3
    assert sorted(dal.open("g.p", "first-six").to_numpy()["id"].tolist()) == list(range(6))
    with pytest.raises(DalError, match="expired"):
        dal.open("g.p", 0)
    assert json.loads(run(any_cat, "gc", "g.p", "--keep-last", "1", "--json")[1])["deleted_files"] == []
    # later writes and syncs go on after the expired records are gone
    assert dal.write(rows(1, 10), "g.p", format="petastorm").number == 4
    assert dal.sync("g.p") == []


def test_gc_bad_input(cat: Catalog) -> None:
    overwrite_history("g.b", 2)
    code, _out, err = run(cat, "gc", "g.b", "--keep-last", "0")
    assert code == 2 and "--keep-last" in err
    code, _out, err = run(cat, "gc", "g.b", "--older-than", "a while", "--json")
    assert code == 2 and "duration" in json.loads(err)["error"]
    code, _out, err = run(cat, "gc", "nope.x", "--keep-last", "1")
    assert code == 1 and err.startswith("dal: error:") and err.count("\n") == 1
    with pytest.raises(DalError):
        lifecycle.gc("g.b", keep_last=True)
    with pytest.raises(DalError):
        lifecycle.gc("g.b", older_than="30d")  # type: ignore[arg-type]
    assert [v.unavailable for v in cat.versions("g.b")] == [None, None]


def test_delta_partition_values_needing_escapes(cat: Catalog) -> None:
    """Partition directories whose names delta-rs escapes (spaces, ':', '%', '/') match the log's paths."""
    for i in range(3):
        t = pa.table({"id": [i, i + 10], "k": ["a b:c", "50%/x"]})
        dal.write(t, "g.e", partition_by=["k"], mode="overwrite" if i else "append")
    location = cat.get_dataset("g.e").location
    before = files_under(location)
    r = lifecycle.gc("g.e", keep_last=1)
    assert r.expired == (0, 1) and len(r.deleted) == 4
    assert before - files_under(location) == set(r.deleted)
    assert sorted(dal.open("g.e").to_arrow().column("id").to_pylist()) == [2, 12]


def test_gc_refuses_when_a_kept_file_is_missing(cat: Catalog) -> None:
    overwrite_history("g.m", 3)
    location = cat.get_dataset("g.m").location
    (kept,) = [f.uri for f in dal.open("g.m").files()]
    os.remove(kept)  # removed behind dal's back (another tool's vacuum, a person)
    before = files_under(location)
    with pytest.raises(DalError, match="cannot find"):
        lifecycle.gc("g.m", keep_last=1)
    assert files_under(location) == before
    assert all(v.unavailable is None for v in cat.versions("g.m"))


def test_adopting_again_after_gc_and_drop_keeps_the_history_honest(cat: Catalog) -> None:
    """Register a table again after ``dal gc`` and ``dal drop``: the versions gc deleted came back as ordinary
    versions (Delta: listed as readable, failing when read) or were renumbered (Petastorm: version 3 became
    version 0). Now the numbers stay and a version whose files are gone is listed as unavailable, saying why;
    a version whose files are all still there (Delta's v2: the overwrite v3 appends to) reads as delta-rs reads it."""
    from deltalake import DeltaTable

    for i in range(4):
        mode = "overwrite" if i == 2 else "append"
        dal.write(table(10, 100 * i), "ad.delta", mode=mode)
        dal.write(rows(5, 100 * i), "ad.petastorm", format="petastorm", schema=SCHEMA, mode=mode)
    locations = {n: cat.get_dataset(n).location for n in ("ad.delta", "ad.petastorm")}
    last = {n: sorted(dal.open(n).to_arrow().column("id").to_pylist()) for n in locations}
    gone = {"ad.delta": [True, True, False, False], "ad.petastorm": [True, True, True, False]}
    for name, location in locations.items():
        assert lifecycle.gc(name, keep_last=1).expired == (0, 1, 2)
        lifecycle.drop(name)
        dal.register(name, location, format=name.removeprefix("ad."))
        versions = cat.versions(name)
        assert [(v.number, v.storage_version) for v in versions] == [(i, i) for i in range(4)], name
        assert [v.unavailable is not None for v in versions] == gone[name], name
        for v, unreadable in enumerate(gone[name]):
            if unreadable:
                with pytest.raises(DalError, match=rf"{name} version {v} .*cannot be read: .*(gone|expired)"):
                    dal.open(name, v)
            elif name == "ad.delta":
                theirs = DeltaTable(location, version=v).to_pyarrow_table().column("id").to_pylist()
                assert sorted(dal.open(name, v).to_arrow().column("id").to_pylist()) == sorted(theirs)
        assert sorted(dal.open(name, 3).to_arrow().column("id").to_pylist()) == last[name]
