"""``dal.register`` of a table dal wrote, into another catalog, carries what the table's own commits record: the
time column, the description and each version's tags (Delta and Petastorm); explicit arguments win; what a table
records is checked like any input (a tag that is not a tag name, a time column that is no column any more);
tables written before these were recorded register as before."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal import ScalarCodec, TensorField, TensorSchema
from dal.catalog import Catalog
from dal.formats.registry import get_format
from tests.conftest import use_catalog

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = TensorSchema("Events", [TensorField("id", np.int64, (), ScalarCodec()),
                                 TensorField("at", np.int64, (), ScalarCodec())])  # fmt: skip


def rows(fmt: str, start: int, n: int) -> object:
    if fmt == "petastorm":
        return [{"id": i, "at": i * 60} for i in range(start, start + n)]
    return pa.table(
        {"id": list(range(start, start + n)), "at": [T0 + timedelta(minutes=i) for i in range(start, start + n)]}
    )


@pytest.fixture(params=["delta", "petastorm"])
def written(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A table dal wrote (three versions: created with a time column, a description and a tag; an append with
    another tag; an append with none) in one catalog; returns its format and location."""
    fmt = str(request.param)
    use_catalog(f"sqlite:///{tmp_path}/first.db", tmp_path, monkeypatch)
    where = str(tmp_path / "events")
    schema = {"schema": SCHEMA} if fmt == "petastorm" else {}
    dal.write(rows(fmt, 0, 3), "src.events", format=fmt, path=where, time_column="at", description="clicks",
              tags=["first"], **schema)  # fmt: skip
    dal.write(rows(fmt, 3, 2), "src.events", format=fmt, tags=["second", "reviewed"])
    dal.write(rows(fmt, 5, 1), "src.events", format=fmt)
    return fmt, where


def test_register_carries_time_column_description_and_tags(written: tuple[str, str], tmp_path: Path) -> None:
    # (read-only: the table belongs to the catalog that wrote it; see tests/ownership/test_one_catalog.py)
    fmt, where = written
    other = Catalog(f"sqlite:///{tmp_path}/other.db")
    versions = dal.register("copy.events", where, format=fmt, catalog=other, read_only=True)
    info = other.get_dataset("copy.events")
    assert (info.time_column, info.description) == ("at", "clicks")
    assert other.tags("copy.events") == {"first": 0, "reviewed": 1, "second": 1}
    assert [v.tags for v in versions] == [("first",), ("reviewed", "second"), ()]  # the values returned, tagged
    assert versions == other.versions("copy.events")


def test_explicit_arguments_win(written: tuple[str, str], tmp_path: Path) -> None:
    fmt, where = written
    other = Catalog(f"sqlite:///{tmp_path}/other.db")
    dal.register("copy.events", where, format=fmt, description="mine", time_column="id", catalog=other, read_only=True)
    info = other.get_dataset("copy.events")
    assert (info.time_column, info.description) == ("id", "mine")
    assert other.tags("copy.events") == {"first": 0, "reviewed": 1, "second": 1}  # no argument for them


def test_a_later_write_changes_what_the_table_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The newest write's description and time column; a tag given again later moves; a schema overwrite that
    dropped the time column leaves none (never a name that is not a column)."""
    first = use_catalog(f"sqlite:///{tmp_path}/first.db", tmp_path, monkeypatch)
    where = str(tmp_path / "t")
    dal.write(rows("delta", 0, 2), "src.t", path=where, time_column="at", description="old", tags=["prod"])
    dal.write(rows("delta", 2, 2), "src.t", description="new")
    first.untag("src.t", "prod")
    dal.write(rows("delta", 4, 1), "src.t", tags=["prod"])
    other = Catalog(f"sqlite:///{tmp_path}/other.db")
    dal.register("copy.t", where, catalog=other, read_only=True)
    assert (other.get_dataset("copy.t").description, other.get_dataset("copy.t").time_column) == ("new", "at")
    assert other.tags("copy.t") == {"prod": 2}
    dal.write(pa.table({"x": [1]}), "src.t", mode="overwrite", schema_mode="overwrite")
    other.delete_dataset("copy.t")  # one location is one dataset's: registered again, afresh
    dal.register("copy.t2", where, catalog=other, read_only=True)
    assert other.get_dataset("copy.t2").time_column is None


def test_what_a_table_records_is_checked() -> None:
    from dal.formats.described import DESCRIPTION_KEY, TAGS_KEY, TIME_COLUMN_KEY, Described

    commits = [
        (0, {TIME_COLUMN_KEY: "at", DESCRIPTION_KEY: "a\x00b", TAGS_KEY: json.dumps(["ok", "12", "bad tag", 5, "ok"])}),
        (1, {TAGS_KEY: "not json"}),
        (2, {TAGS_KEY: json.dumps({"a": 1})}),
    ]
    got = Described.of(commits, ["id"])
    assert got == Described(time_column=None, description=None, tags={0: ("ok",)})
    assert Described.of([(0, {TIME_COLUMN_KEY: "", DESCRIPTION_KEY: ""})], ["at"]) == Described(None, "", {})


def test_a_table_an_older_dal_wrote_registers_as_before(tmp_path: Path) -> None:
    """No dal keys in its commits (delta-rs alone here): nothing carried, nothing refused."""
    import deltalake

    from dal.formats.described import Described

    where = str(tmp_path / "plain")
    deltalake.write_deltalake(where, rows("delta", 0, 2))  # type: ignore[arg-type]
    assert get_format("delta").described(where, {}) == Described()
    other = Catalog(f"sqlite:///{tmp_path}/other.db")
    dal.register("copy.plain", where, catalog=other)
    info = other.get_dataset("copy.plain")
    assert (info.time_column, info.description, other.tags("copy.plain")) == (None, "", {})
