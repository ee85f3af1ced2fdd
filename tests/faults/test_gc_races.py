"""gc against writes in flight (issue #22): a real writer process paused at every step of its write
(``DAL_TEST_PAUSE``), gc with ``safe_age`` 0 — every unreferenced file counts as old enough, the worst case of
any safe age — expiring all but the newest version: no row lost, no version with a missing file, the dataset
writable. And gc paused between its choice of versions and its listing while a write lands or begins."""

from __future__ import annotations

from pathlib import Path

import pytest

import dal
from dal.catalog import Catalog
from dal.ops import lifecycle
from dal.storage import intents
from tests.faults.conftest import finish, start_paused
from tests.faults.races import (
    NEW,
    NOW,
    STREAMED,
    check,
    data,
    files_below,
    gc_code,
    history,
    stream_writer,
    writer_code,
)

POINTS = [
    ("delta", "intent-registered"),
    ("delta", "after-storage-commit"),
    ("petastorm", "intent-registered"),
    ("petastorm", "petastorm-files-written"),
    ("petastorm", "petastorm-metadata-written"),
    ("petastorm", "record-written"),
    ("petastorm", "after-storage-commit"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "point"), POINTS)
def test_gc_against_a_write_paused_at_each_step_loses_nothing(
    cat: Catalog, tmp_path: Path, fmt: str, point: str
) -> None:
    name = f"race.{fmt}"
    before = history(name, fmt)
    proc, release = start_paused(writer_code(name, fmt, NEW), point, tmp_path)
    try:
        location = cat.get_dataset(name).location
        in_flight = [m for m in files_below(location) if intents.is_marker(m)]
        assert bool(in_flight) == (point != "after-storage-commit"), "an intent until the storage commit"
        result = lifecycle.gc(name, keep_last=1, safe_age=NOW)
        assert set(result.expired) | set(result.kept) >= {0, 1}
    finally:
        out = finish(proc, release)  # the write succeeded
    assert check(cat, name, [*before, *NEW]) == 0
    assert int(out.strip().splitlines()[-1]) == cat.versions(name)[-2].number  # its version (then check's write)
    assert not [m for m in files_below(location) if intents.is_marker(m)], "its intent ended with it"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
def test_a_write_landing_between_gcs_sync_and_its_listing(cat: Catalog, tmp_path: Path, fmt: str) -> None:
    """The whole write (intent, files, commit, record) happens after gc chose the versions to keep and before it
    lists the files: they are unreferenced by what gc knows; gc's second look finds the new version."""
    name = f"between.{fmt}"
    before = history(name, fmt)
    gc_proc, gc_release = start_paused(gc_code(name), "gc-chosen", tmp_path)
    try:
        dal.write(data(fmt, NEW), name, format=fmt)
    finally:
        finish(gc_proc, gc_release)
    assert check(cat, name, [*before, *NEW]) == 0


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "point"), [("petastorm", "petastorm-files-written"), ("delta", "stream-paused")])
def test_a_write_that_began_after_gcs_first_look(cat: Catalog, tmp_path: Path, fmt: str, point: str) -> None:
    """gc looked at the intents, synced and chose; then a write registered and staged; gc lists its files
    (unreferenced, claimed by no intent gc saw): the look after the listing sees the new intent."""
    name = f"late.{fmt}"
    before = history(name, fmt)
    gc_proc, gc_release = start_paused(gc_code(name), "gc-chosen", tmp_path)
    code = stream_writer(name) if fmt == "delta" else writer_code(name, fmt, NEW)
    writer, release = start_paused(code, point, tmp_path)
    try:
        finish(gc_proc, gc_release)
    finally:
        finish(writer, release)
    rows = STREAMED if fmt == "delta" else NEW
    assert check(cat, name, [*before, *rows]) == 0
