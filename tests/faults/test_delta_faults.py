"""Delta writes on a full disk: a DalError, the table and the catalog unchanged and still usable."""

from __future__ import annotations

from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError
from tests.faults.conftest import fill


def test_delta_write_on_a_full_disk_is_a_dal_error_and_changes_nothing(cat: Catalog, small_disk: Path) -> None:
    where = str(small_disk / "events")
    dal.write(pa.table({"id": [0, 1, 2]}), "disk.events", path=where)
    filler = fill(small_disk, leave=8192)
    rng = np.random.default_rng(7)
    big = pa.table({"id": rng.integers(3, 2**62, 400_000)})  # ~3 MB that does not compress
    with pytest.raises(DalError, match="No space left on device") as e:
        dal.write(big, "disk.events")
    assert "disk.events" in str(e.value) or where in str(e.value)
    assert deltalake.DeltaTable(where).version() == 0
    assert [v.storage_version for v in cat.versions("disk.events")] == [0]
    assert sorted(dal.open("disk.events").to_arrow()["id"].to_pylist()) == [0, 1, 2]
    filler.unlink()
    assert dal.write(pa.table({"id": [3]}), "disk.events").storage_version == 1
    assert sorted(dal.open("disk.events").to_arrow()["id"].to_pylist()) == [0, 1, 2, 3]


def test_delta_commit_that_landed_before_an_error_is_recorded_not_reported_as_failed(
    cat: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost response after the store took the commit: the write is recorded, never a failure to retry."""
    dal.write(pa.table({"id": [0, 1, 2]}), "lost.reply")
    real = deltalake.write_deltalake

    def commits_then_loses_the_reply(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise OSError("connection reset by peer")

    with monkeypatch.context() as m:
        m.setattr(deltalake, "write_deltalake", commits_then_loses_the_reply)
        v = dal.write(pa.table({"id": [3, 4]}), "lost.reply")  # the old code raised FormatError here
    assert v.number == 1 and v.storage_version == 1
    assert sorted(dal.open("lost.reply").to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_delta_write_that_did_not_land_is_still_an_error(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    dal.write(pa.table({"id": [0]}), "no.reply")

    def refuses(*args: object, **kwargs: object) -> None:
        raise OSError("connection refused")

    with monkeypatch.context() as m:
        m.setattr(deltalake, "write_deltalake", refuses)
        with pytest.raises(DalError, match="connection refused"):
            dal.write(pa.table({"id": [1]}), "no.reply")
    assert [v.storage_version for v in cat.versions("no.reply")] == [0]
