"""A catalog error after a write's storage commit is always ``CommittedNotRecorded`` ("do NOT retry": the
rows are stored, a retry would store them twice), naming the command that records the commit — also when
the dataset was renamed or dropped while the write ran (issue #22: a write racing ``dal rename`` reported
``DatasetExists``), and when the version was recorded but a tag could not be set."""

from __future__ import annotations

from pathlib import Path

import pytest

import dal
from dal.catalog import Catalog
from dal.ops import lifecycle
from tests.faults.conftest import start_paused
from tests.faults.races import NEW, SCHEMA, data, ids_of, writer_code


def _finish_failing(proc, release: Path) -> str:  # type: ignore[no-untyped-def]
    """Let the paused writer go on; the last line it printed (its exception) once it failed."""
    release.touch()
    out, _ = proc.communicate(timeout=120)
    text = out.decode().strip()
    assert proc.returncode != 0, text
    return text.splitlines()[-1]


def _first(name: str, fmt: str, path: str | None = None) -> None:
    extra = {"schema": SCHEMA} if fmt == "petastorm" else {}
    dal.write(data(fmt, [1, 2]), name, format=fmt, path=path, **extra)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["delta", "petastorm"])
@pytest.mark.parametrize("where", ["default", "path"])
def test_a_write_racing_rename_is_committed_not_recorded(cat: Catalog, tmp_path: Path, fmt: str, where: str) -> None:
    _first("old.name", fmt, str(tmp_path / "elsewhere") if where == "path" else None)
    proc, release = start_paused(writer_code("old.name", fmt, NEW), "after-storage-commit", tmp_path)
    lifecycle.rename("old.name", "new.name")
    error = _finish_failing(proc, release)
    assert error.startswith("dal.catalog.errors.CommittedNotRecorded: old.name: the data was committed"), error
    assert "do NOT retry" in error and "`dal sync new.name` records it" in error
    assert [v.number for v in cat.versions("new.name")] == [0]
    assert [v.storage_version for v in dal.sync("new.name")] == [1]  # what the message says records it
    assert ids_of("new.name") == sorted([1, 2, *NEW])
    assert [d.name for d in cat.list_datasets()] == ["new.name"]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["default", "path"])
def test_a_write_racing_drop_is_committed_not_recorded(cat: Catalog, tmp_path: Path, where: str) -> None:
    """The dataset was dropped from the catalog (its data kept) while the write ran: the write does not bring
    it back by itself; it says how to."""
    path = str(tmp_path / "elsewhere") if where == "path" else None
    _first("gone.ds", "delta", path)
    location = cat.get_dataset("gone.ds").location
    proc, release = start_paused(writer_code("gone.ds", "delta", NEW), "after-storage-commit", tmp_path)
    lifecycle.drop("gone.ds")
    error = _finish_failing(proc, release)
    assert error.startswith("dal.catalog.errors.CommittedNotRecorded: gone.ds: the data was committed"), error
    assert "do NOT retry" in error and f"`dal register gone.ds {location}` records it" in error
    assert cat.list_datasets() == []
    dal.register("gone.ds", location)
    assert ids_of("gone.ds") == sorted([1, 2, *NEW])


@pytest.mark.slow
def test_tagging_after_a_rename_says_the_version_is_recorded(cat: Catalog, tmp_path: Path) -> None:
    _first("tagged.ds", "delta")
    code = writer_code("tagged.ds", "delta", NEW).replace("storage_options=", "tags=['best'], storage_options=")
    proc, release = start_paused(code, "version-recorded", tmp_path)
    lifecycle.rename("tagged.ds", "renamed.ds")
    error = _finish_failing(proc, release)
    assert "the data was written and recorded as version 1, but tagging it failed" in error, error
    assert "do NOT retry the write: tag it with `dal tag renamed.ds 1 TAG`" in error
    assert [v.number for v in cat.versions("renamed.ds")] == [0, 1] and ids_of("renamed.ds") == sorted([1, 2, *NEW])
