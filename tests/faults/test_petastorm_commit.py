"""The Petastorm commit record: never visible half-written, damaged ones named with a way out, a writer
killed at each step of the commit leaves every version readable, a full disk is a DalError."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.errors import DalError, FormatError
from dal.formats.petastorm.records import ABANDONED_AFTER_S, RECORDS, record_name
from tests.faults.conftest import fill, run_until_paused

SCHEMA = TensorSchema("Frames", [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("depth", np.float32, (4, 4), NdarrayCodec()),
])  # fmt: skip
NAME = "cam.frames"


def rows(start: int, n: int) -> list[dict[str, object]]:
    return [{"id": i, "depth": np.full((4, 4), i, np.float32)} for i in range(start, start + n)]


def ids(version: int | None = None) -> list[int]:
    return sorted(int(i) for i in dal.open(NAME, version).to_numpy(["id"])["id"])


def location(cat: Catalog) -> Path:
    return Path(cat.get_dataset(NAME).location)


def records(loc: Path) -> list[str]:
    return sorted(p.name for p in (loc / RECORDS).iterdir())


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


# -- a record left empty by an older dal ---------------------------------------------------------


def test_empty_record_left_by_an_old_writer_is_an_abandoned_commit(cat: Catalog) -> None:
    dal.write(rows(0, 5), NAME, format="petastorm", schema=SCHEMA)
    loc = location(cat)
    empty = loc / record_name(1)
    empty.touch()  # what dal <= this fix left when killed (or out of space) between O_EXCL-create and write

    # fresh: a writer of an older dal may still be writing it; the error names the file and what to do
    with pytest.raises(FormatError, match=rf"{RECORDS}/0+1\.json is empty .*try again then"):
        dal.write(rows(5, 5), NAME, format="petastorm")
    with pytest.raises(FormatError, match=rf"{RECORDS}/0+1\.json"):
        dal.sync(NAME)

    age(empty, ABANDONED_AFTER_S + 5)
    v = dal.write(rows(5, 5), NAME, format="petastorm")  # the old code failed here forever
    assert v.storage_version == 2  # the abandoned number is never reused
    assert ids() == list(range(10))
    assert dal.sync(NAME) == []
    assert [x.storage_version for x in cat.versions(NAME)] == [0, 2]
    assert empty.stat().st_size == 0  # left as it was


def test_damaged_record_with_its_data_still_there_is_named_with_a_way_out(cat: Catalog) -> None:
    dal.write(rows(0, 3), NAME, format="petastorm", schema=SCHEMA)
    loc = location(cat)
    (loc / record_name(1)).write_bytes(b'{"version": 1, "direc')  # truncated by hand or a full disk
    stale = loc / "v1-deadbeef0000"
    (stale).mkdir()
    (stale / "_common_metadata").write_bytes(b"x")
    age(loc / record_name(1), ABANDONED_AFTER_S + 5)

    with pytest.raises(FormatError) as e:
        dal.write(rows(3, 3), NAME, format="petastorm")
    message = str(e.value)
    assert record_name(1) in message and "v1-deadbeef0000" in message and "delete that directory" in message
    assert ids() == [0, 1, 2]  # readers of recorded versions are not affected

    # the way out the message gives
    (stale / "_common_metadata").unlink()
    stale.rmdir()
    assert dal.write(rows(3, 3), NAME, format="petastorm").storage_version == 2
    assert ids() == list(range(6))


# -- a writer killed at each step of the commit -----------------------------------------------------

WRITER = textwrap.dedent(
    """
    import numpy as np
    import dal
    from tests.faults.test_petastorm_commit import SCHEMA, NAME, rows
    dal.write(rows(100, 4), NAME, format="petastorm")
    """
)
STEPS = ["petastorm-files-written", "petastorm-metadata-written", "record-written", "after-storage-commit"]


@pytest.mark.parametrize("point", STEPS)
def test_writer_killed_at_each_step(cat: Catalog, tmp_path: Path, point: str) -> None:
    dal.write(rows(0, 4), NAME, format="petastorm", schema=SCHEMA)
    loc = location(cat)
    before = records(loc)

    run_until_paused(WRITER, point, tmp_path)

    # never a half-written record: every published record parses, temporary files are hidden
    published = [r for r in records(loc) if not r.startswith(".")]
    for name in published:
        assert (loc / RECORDS / name).read_bytes().startswith(b"{")
    if point == "after-storage-commit":
        assert len(published) == 2  # committed, not recorded: sync records it, exactly once
        assert [v.storage_version for v in cat.versions(NAME)] == [0]
        assert [v.storage_version for v in dal.sync(NAME)] == [1]
        assert dal.sync(NAME) == []
        assert ids() == [0, 1, 2, 3, 100, 101, 102, 103]
    else:
        assert published == before  # nothing committed
        assert dal.sync(NAME) == []
        assert ids() == [0, 1, 2, 3]
    # the dataset stays writable and readable (and a temporary record left by the kill is swept)
    if point == "record-written":
        assert len(list((loc / RECORDS).glob(".*.tmp"))) == 1  # written, fsynced, never published
    for tmp in (loc / RECORDS).glob(".*.tmp"):
        age(tmp, ABANDONED_AFTER_S + 5)
    latest = dal.write(rows(200, 2), NAME, format="petastorm")
    assert not list((loc / RECORDS).glob(".*.tmp"))
    assert ids(latest.number)[-2:] == [200, 201]
    assert len(ids(latest.number)) == len(ids(latest.number - 1)) + 2


# -- a full disk ------------------------------------------------------------------------------------


def test_petastorm_write_on_a_full_disk_is_a_dal_error_and_leaves_the_dataset_usable(
    cat: Catalog, small_disk: Path
) -> None:
    where = str(small_disk / "frames")
    dal.write(rows(0, 5), NAME, format="petastorm", schema=SCHEMA, path=where)
    filler = fill(small_disk, leave=4096)
    big = [{"id": i, "depth": np.random.default_rng(i).random((4, 4), np.float32)} for i in range(5, 20_005)]
    with pytest.raises(DalError, match="No space left on device") as e:
        dal.write(big, NAME, format="petastorm")
    assert "nothing was committed" in str(e.value)
    assert [v.storage_version for v in cat.versions(NAME)] == [0]
    assert ids() == list(range(5))
    assert records(Path(where)) == [Path(record_name(0)).name]
    assert [p.name for p in Path(where).iterdir() if p.name.startswith("v")] == [
        Path(cat.version(NAME).properties["path"]).name
    ]  # the failed write's directory is gone
    filler.unlink()
    assert dal.write(rows(5, 5), NAME, format="petastorm").storage_version == 1
    assert ids() == list(range(10))


def test_full_disk_when_publishing_the_record_leaves_no_record(
    cat: Catalog, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old code created the record empty and then failed to fill it: the dataset was blocked for good."""
    where = str(small_disk / "frames")
    dal.write(rows(0, 5), NAME, format="petastorm", schema=SCHEMA, path=where)
    # room for the data files and _common_metadata, not for the record: fill right before publishing
    from dal.storage import location as location_module

    real = location_module._link_exclusive
    fillers: list[Path] = []

    def full_then_publish(final: str, data: bytes) -> bool:
        fillers.append(fill(small_disk))
        return real(final, data)

    with monkeypatch.context() as m:
        m.setattr(location_module, "_link_exclusive", full_then_publish)
        with pytest.raises(FormatError, match="No space left on device"):
            dal.write(rows(5, 5), NAME, format="petastorm")
    assert records(Path(where)) == [Path(record_name(0)).name]  # no empty record, no temporary file
    for f in fillers:
        f.unlink()
    assert dal.write(rows(5, 5), NAME, format="petastorm").storage_version == 1
    assert ids() == list(range(10))


def test_publish_that_fails_after_the_record_landed_keeps_the_commit(
    cat: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An object store may take the PUT and then time out: the commit happened, its files must stay."""
    dal.write(rows(0, 3), NAME, format="petastorm", schema=SCHEMA)
    from dal.storage import location as location_module

    real = location_module._link_exclusive

    def lands_then_times_out(final: str, data: bytes) -> bool:
        real(final, data)
        raise TimeoutError("the response never came")

    with monkeypatch.context() as m:
        m.setattr(location_module, "_link_exclusive", lands_then_times_out)
        v = dal.write(rows(3, 3), NAME, format="petastorm")  # the old code deleted the committed files here
    assert v.storage_version == 1
    assert ids() == list(range(6))
