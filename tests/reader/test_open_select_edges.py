"""Smaller edges of opening and scanning (issue #23, item 13): version references of NumPy and date types, a tag
that looks like a date, ``select()`` of nothing, a schema overwrite that drops the time column, and
``Dataset.sample`` / ``Dataset.balance`` beside ``select`` / ``filter`` / ``shard``."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pandas as pd
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import FilterError, InvalidName


def frame(n: int, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": np.arange(start, start + n),
            "ts": pd.date_range("2024-04-01", periods=n, freq="h", tz="UTC"),
            "label": np.arange(n) % 3,
        }
    )


def test_open_takes_numpy_integers_and_dates(sqlite_env: Catalog) -> None:
    dal.write(frame(5), "e.refs", time_column="ts")
    dal.write(frame(5, 100), "e.refs")
    for ref in (np.int64(1), np.int32(1), np.uint8(1)):
        assert dal.open("e.refs", ref).number == 1  # type: ignore[arg-type]
    assert dal.open("e.refs", datetime.now(UTC)).number == 1  # as of now: after both writes
    later = datetime.now(UTC).date() + pd.Timedelta(days=2)
    with pytest.raises(dal.errors.VersionNotFound, match="in the future"):
        dal.open("e.refs", later)  # that day's midnight UTC has not come yet: nothing pins it
    with pytest.raises(dal.errors.VersionNotFound, match="as of 2000-01-01T00:00:00"):
        dal.open("e.refs", date(2000, 1, 1))
    with pytest.raises(InvalidName, match="invalid version"):
        dal.open("e.refs", np.bool_(True))  # type: ignore[arg-type]
    with pytest.raises(InvalidName, match="invalid version"):
        dal.open("e.refs", 1.0)  # type: ignore[arg-type]


def test_a_tag_wins_over_a_date_only_on_its_exact_text(sqlite_env: Catalog) -> None:
    """A string is a tag when a tag of exactly that text exists, otherwise a time; a date object is a time."""
    first = dal.write(frame(5), "e.tags")
    earlier = "2020-04-01"  # before both writes (a time after them would be in the future: refused)
    sqlite_env.tag("e.tags", 0, earlier)
    dal.write(frame(5, 100), "e.tags")
    assert dal.open("e.tags", earlier).number == first.number == 0  # the tag
    for time_ref in (date.fromisoformat(earlier), earlier + "T00:00"):  # a date object, and not the tag's text
        with pytest.raises(dal.errors.VersionNotFound, match="as of 2020-04-01T00:00:00.*first version is from"):
            dal.open("e.tags", time_ref)
    today = datetime.now(UTC).date().isoformat()
    sqlite_env.tag("e.tags", 1, today)
    assert dal.open("e.tags", today).number == 1  # the tag, not today's midnight (before both writes)


def test_select_of_no_column_is_refused(sqlite_env: Catalog) -> None:
    """count() said 300,000 and to_arrow() gave 0 rows for ds.select()."""
    dal.write(frame(7), "e.sel")
    ds = dal.open("e.sel")
    for call in (ds.select, ds.scan().select, lambda: ds.to_arrow(columns=[])):
        with pytest.raises(FilterError, match="select needs at least one column; count"):
            call()
    assert ds.scan().count() == ds.select("id").to_arrow().num_rows == 7


def test_a_schema_overwrite_that_drops_the_time_column_clears_it(sqlite_env: Catalog) -> None:
    dal.write(frame(6), "e.tc", time_column="ts")
    dal.write(frame(6).drop(columns=["ts"]), "e.tc", mode="overwrite", schema_mode="overwrite")
    assert sqlite_env.get_dataset("e.tc").time_column is None
    with pytest.raises(FilterError, match="e.tc has no time column; pass window"):
        dal.open("e.tc").window("2024-04-01", "2024-04-02")
    renamed = frame(6).rename(columns={"ts": "event_time"})
    dal.write(renamed, "e.tc", mode="overwrite", schema_mode="overwrite", time_column="event_time")
    assert sqlite_env.get_dataset("e.tc").time_column == "event_time"
    assert dal.open("e.tc").window("2024-04-01T02:00", None).count() == 4
    # an old version keeps its rows; its window names the column it has
    assert dal.open("e.tc", 0).window("2024-04-01", "2024-04-02", column="ts").count() == 6


def test_dataset_sample_and_balance(sqlite_env: Catalog) -> None:
    dal.write(frame(300), "e.draw")
    ds = dal.open("e.draw")
    assert ds.sample(rows=20, seed=3).to_arrow().equals(ds.scan().sample(rows=20, seed=3).to_arrow())
    assert ds.sample(0.5, seed=1).count() == ds.scan().sample(0.5, seed=1).count()
    balanced = ds.balance("label", rows=30, seed=2).to_pandas()
    assert balanced.label.value_counts().to_dict() == {0: 10, 1: 10, 2: 10}
    assert balanced.equals(ds.scan().balance("label", rows=30, seed=2).to_pandas())
