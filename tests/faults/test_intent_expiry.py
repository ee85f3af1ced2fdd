"""Intents' lifecycle against gc and purge (issue #22): the marker names its writer; a killed writer's intent
expires at once on its machine, one on another machine when its heartbeat stops, an unreadable one after the
same delay; purge refuses while a write is in flight; a commit whose staged files vanished publishes nothing;
a Petastorm version an older dal published without its files has a documented way out."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

import dal
from dal.catalog import Catalog
from dal.errors import FormatError
from dal.ops import lifecycle
from dal.storage import intents
from dal.storage.location import Location
from tests.faults.conftest import finish, run_until_paused, start_paused
from tests.faults.races import (
    NEW,
    NOW,
    check,
    data,
    files_below,
    history,
    writer_code,
)


@pytest.mark.slow
def test_a_killed_writers_intent_expires_at_once_on_its_machine(cat: Catalog, tmp_path: Path) -> None:
    before = history("killed.p", "petastorm")
    location = cat.get_dataset("killed.p").location
    committed = files_below(location)
    run_until_paused(writer_code("killed.p", "petastorm", NEW), "petastorm-files-written", tmp_path)
    left = files_below(location) - committed
    markers = {f for f in left if intents.is_marker(f)}
    assert len(markers) == 1 and len(left) > 1  # the dead writer's intent and its staged files
    kept = lifecycle.gc("killed.p")  # the default safe age: its files are young, so they stay (second line)
    assert set(kept.deleted) == markers and files_below(location) - committed == left - markers
    swept = lifecycle.gc("killed.p", safe_age=NOW)  # no live intent claims them: abandoned
    assert set(swept.deleted) == left - markers and files_below(location) == committed
    assert check(cat, "killed.p", before) == 0


def _foreign_marker(location: str, token: str, age_s: float, body: bytes | None = None) -> Path:
    """A marker as a writer on another machine leaves it, last refreshed ``age_s`` ago."""
    intent = intents.Intent(f"{token}{'0' * 20}", "other.p", token, 4242, "77", {"host": "elsewhere",
                            "boot_id": "b", "pid_ns": "pid:[1]"}, time.time() - age_s, time.time() - age_s)  # fmt: skip
    path = Path(location, intents.DIR, f"{intent.write_id}.json")
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(intent.to_json() if body is None else body)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def _staged_elsewhere(location: str, token: str) -> Path:
    """A version directory a writer on another machine is staging (an old file in it: a long write)."""
    folder = Path(location, f"v9-{token}")
    folder.mkdir()
    part = folder / "part-00000.parquet"
    part.write_bytes(b"PAR1")
    then = time.time() - 7200
    os.utime(part, (then, then))
    return folder


@pytest.mark.slow
def test_a_writer_on_another_machine_is_protected_until_its_heartbeat_stops(cat: Catalog) -> None:
    history("remote.p", "petastorm")
    location = cat.get_dataset("remote.p").location
    token = "abcdef012345"
    marker = _foreign_marker(location, token, age_s=intents.HEARTBEAT_S)  # refreshed a heartbeat ago
    folder = _staged_elsewhere(location, token)
    assert lifecycle.gc("remote.p", safe_age=NOW).deleted == ()  # live: its files stay, whatever their age
    assert folder.exists() and marker.exists()
    with pytest.raises(dal.DalError, match="a write is in flight"):
        lifecycle.drop("remote.p", purge=True)
    stale = time.time() - intents.EXPIRES_AFTER_S - 1  # no heartbeat for longer than the expiry: dead
    os.utime(marker, (stale, stale))
    swept = lifecycle.gc("remote.p", safe_age=NOW)
    assert set(swept.deleted) == {f"v9-{token}/part-00000.parquet", f"{intents.DIR}/{marker.name}"}
    assert not folder.exists() and not marker.exists()


@pytest.mark.slow
def test_an_unreadable_marker_protects_every_unreferenced_file_until_it_expires(cat: Catalog) -> None:
    history("garbled.p", "petastorm")
    location = cat.get_dataset("garbled.p").location
    marker = _foreign_marker(location, "0123456789ab", age_s=1, body=b'{"write_id": "half a mar')
    folder = _staged_elsewhere(location, "fedcba987654")  # claimed by no readable intent
    assert lifecycle.gc("garbled.p", safe_age=NOW).deleted == ()
    stale = time.time() - intents.EXPIRES_AFTER_S - 1
    os.utime(marker, (stale, stale))
    assert len(lifecycle.gc("garbled.p", safe_age=NOW).deleted) == 2 and not folder.exists()


@pytest.mark.slow
def test_a_commit_whose_staged_files_vanished_publishes_nothing(cat: Catalog, tmp_path: Path) -> None:
    """Files deleted behind the write's back (a gc of an older dal, a person): a clear error, no version."""
    before = history("vanish.p", "petastorm")
    location = Path(cat.get_dataset("vanish.p").location)
    records = sorted(p.name for p in (location / "_dal_versions").iterdir())
    proc, release = start_paused(writer_code("vanish.p", "petastorm", NEW), "petastorm-files-written", tmp_path)
    (staged,) = [p for p in location.glob("v3-*/*.parquet")]
    staged.unlink()
    release.touch()
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0
    last = out.decode().strip().splitlines()[-1]
    assert "FormatError" in last and "are gone" in last and "nothing was committed" in last, last
    assert sorted(p.name for p in (location / "_dal_versions").iterdir()) == records  # nothing published
    assert not list(location.glob("v3-*"))  # and its directory removed
    assert [v.number for v in cat.versions("vanish.p")] == [0, 1, 2]
    assert check(cat, "vanish.p", before) == 0


@pytest.mark.slow
def test_a_petastorm_version_published_without_its_files_has_a_way_out(cat: Catalog, tmp_path: Path) -> None:
    """What an older dal left when gc removed a running writer's directory: the record was published anyway and
    the catalog never recorded it. sync, write and gc fail, naming the record and how to give the version up;
    after that the dataset goes on from the version before."""
    before = history("broken.p", "petastorm")
    location = Path(cat.get_dataset("broken.p").location)
    run_until_paused(writer_code("broken.p", "petastorm", NEW), "after-storage-commit", tmp_path)
    record = location / "_dal_versions" / f"{3:020d}.json"
    assert record.exists()
    for f in location.glob("v3-*/**/*"):  # what the older gc deleted
        if f.is_file():
            f.unlink()
    for attempt in (
        lambda: dal.sync("broken.p"),
        lambda: dal.write(data("petastorm", [7]), "broken.p", format="petastorm"),
        lambda: lifecycle.gc("broken.p"),
    ):
        with pytest.raises(FormatError, match=r"version 3 .* published but its files are gone") as e:
            attempt()
        assert "empty its record" in str(e.value) and str(record) in str(e.value)
    record.write_bytes(b"")  # the way out: the record emptied, then left for the abandoned-commit delay
    then = time.time() - 120
    os.utime(record, (then, then))
    assert dal.sync("broken.p") == []
    assert dal.write(data("petastorm", [7]), "broken.p", format="petastorm").storage_version == 4
    assert check(cat, "broken.p", [*before, 7]) == 0


def test_purge_refuses_while_a_write_is_in_flight_and_goes_on_after(cat: Catalog, tmp_path: Path) -> None:
    history("purge.d", "delta")
    proc, release = start_paused(writer_code("purge.d", "delta", NEW), "intent-registered", tmp_path)
    try:
        with pytest.raises(dal.DalError, match=r"a write is in flight .*nothing was deleted"):
            lifecycle.drop("purge.d", purge=True)
    finally:
        finish(proc, release)
    location = cat.get_dataset("purge.d").location
    assert lifecycle.drop("purge.d", purge=True).purged and not Path(location).exists()


def test_marker_records_the_writer(cat: Catalog, tmp_path: Path) -> None:
    history("who.d", "delta")
    proc, release = start_paused(writer_code("who.d", "delta", NEW), "intent-registered", tmp_path)
    try:
        loc = Location.of(cat.get_dataset("who.d").location)
        (rel,) = [r for r, _s in loc.list(intents.DIR)]
        body = json.loads(loc.read(f"{intents.DIR}/{rel}"))
        assert body["pid"] == proc.pid and body["dataset"] == "who.d" and body["token"] in rel
        seen = intents.scan(loc)
        assert [i.pid for i in seen.live] == [proc.pid] and seen.expired == ()
        os.kill(proc.pid, signal.SIGSTOP)  # stopped, not dead: still live (its heartbeat may lapse later)
        assert [i.pid for i in intents.scan(loc).live] == [proc.pid]
        os.kill(proc.pid, signal.SIGCONT)
    finally:
        finish(proc, release)
    assert intents.scan(loc).live == ()
