"""Windows over time-partitioned layouts: the rows every read path yields, against pandas.

A ``date=`` / ``hour=`` directory prunes a window only when dal knows how it derives from the time column (a
rule ``dal.write`` proved over every row it wrote, or one the user declared); otherwise the window is a filter.
Before, ``prune_time_partitions`` read every ``date=`` as the UTC day of the time column: a day cut in
America/Los_Angeles lost the rows of the window's UTC day that sit in the neighbouring LA day, and an
ingestion date lost whatever it liked (issue #23, item 2).

The data spans 2024-03-09 .. 2024-03-12, across Los Angeles' switch to daylight saving time (2024-03-10 10:00
UTC), so days of 23 hours and an hour that does not exist are in it. Spark-written layouts (``to_date(ts)`` /
``hour(ts)`` under several ``spark.sql.session.timeZone``) are in ``test_spark_session_zones``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import TimePartitions
from dal.catalog import Catalog
from dal.errors import DalError, FilterError, SchemaMismatch
from dal.storage import timeparts

START = datetime(2024, 3, 9, tzinfo=UTC)
STEP = timedelta(minutes=9)
ROWS = 560  # 3.5 days
LA, TOKYO = "America/Los_Angeles", "Asia/Tokyo"

# windows as UTC bounds (None: open); the LA days and the DST switch at 2024-03-10T10:00Z are among them
WINDOWS: list[tuple[str | None, str | None]] = [
    ("2024-03-10T00:00", "2024-03-10T06:00"),  # a UTC morning = an LA evening of the day before
    ("2024-03-10T08:00", "2024-03-11T07:00"),  # exactly LA's 23-hour 2024-03-10
    ("2024-03-10T09:30", "2024-03-10T10:30"),  # around the switch
    ("2024-03-09T23:59", "2024-03-10T00:01"),  # a UTC midnight
    ("2024-03-11T07:30", None),  # open end
    (None, "2024-03-09T12:00"),  # open start
    ("2024-03-12T02:00", "2024-03-12T03:00"),  # a Tokyo day's start
]


def frame() -> pd.DataFrame:
    ts = pd.Series(pd.DatetimeIndex([START + k * STEP for k in range(ROWS)]))
    ts[[7, 300]] = pd.NaT  # rows without a time: in no window, and they break no rule
    return pd.DataFrame({"id": np.arange(ROWS), "ts": ts, "x": np.arange(ROWS) / 4})


def day_in(ts: pd.Series, zone: str) -> pd.Series:
    return ts.dt.tz_convert(zone).dt.strftime("%Y-%m-%d")


def hour_in(ts: pd.Series, zone: str) -> pd.Series:
    return ts.dt.tz_convert(zone).dt.hour.astype("Int64")


def expected(df: pd.DataFrame, window: tuple[str | None, str | None], column: str = "ts") -> list[int]:
    t = df[column]
    keep = t.notna()
    lo, hi = (pd.Timestamp(b, tz="UTC") if b is not None else None for b in window)
    if pd.api.types.is_integer_dtype(t):  # epoch seconds
        lo, hi = (b.timestamp() if b is not None else None for b in (lo, hi))
    if lo is not None:
        keep &= t >= lo
    if hi is not None:
        keep &= t < hi
    return sorted(int(i) for i in df[keep].id)


def ids(scan: dal.Scan) -> list[int]:
    return sorted(scan.select("id").to_arrow().column("id").to_pylist())


def check_paths(scan: dal.Scan, want: list[int]) -> None:
    """to_arrow, count, iter_batches, shards (by row id: disjoint and covering), worker splits and to_torch."""
    assert ids(scan) == want
    assert scan.count() == len(want)
    assert sorted(i for b in scan.select("id").iter_batches(13) for i in b.column("id").to_pylist()) == want
    ranks = [ids(scan.shard(r, 3, "keep")) for r in range(3)]
    assert sorted(i for r in ranks for i in r) == want and sum(map(len, ranks)) == len(want)
    assert [scan.shard(r, 3, "keep").count() for r in range(3)] == [len(r) for r in ranks]
    parts = [scan.select("id").split(p, 2) for p in range(2)]
    got = [i for p in parts for b in scan.select("id").iter_batches(7, tasks=p) for i in b.column("id").to_pylist()]
    assert sorted(got) == want
    torch_ids = [int(i) for b in scan.select("id").to_torch(batch_size=16) for i in b["id"]]
    assert sorted(torch_ids) == want


# -- layouts: (how to build the dataset, the rule dal must end up with) -------------------------------------


def _pandas(name: str, df: pd.DataFrame, parts: list[str], **kw: Any) -> dal.Dataset:
    dal.write(df, name, partition_by=parts, time_column="ts", **kw)
    return dal.open(name)


def _registered(root: Path, name: str, df: pd.DataFrame, parts: list[str], **kw: Any) -> dal.Dataset:
    """A hive-partitioned Parquet directory written by pyarrow (as another tool would), then registered."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    pq.write_to_dataset(table, root / name, partition_cols=parts, row_group_size=20)
    dal.register(name, str(root / name), format="parquet", **kw)
    return dal.open(name)


def _utc(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    return _pandas("t.utc", df.assign(date=day_in(df.ts, "UTC")), ["date"])


def _la_aware(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    """A time column in Los Angeles time and its local days: dal proves the LA rule."""
    return _pandas("t.la", df.assign(ts=df.ts.dt.tz_convert(LA), date=day_in(df.ts, LA)), ["date"])


def _la_days_utc_column(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    """LA days beside a UTC time column (the Spark pattern under an LA session, written from pandas): only UTC
    is tried for a UTC column, which the rows break, so nothing is proven: the window filters."""
    return _pandas("t.la_utc", df.assign(date=day_in(df.ts, LA)), ["date"])


def _ingestion(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    arrived = pd.Series(["2024-03-10", "2024-03-11", "2024-03-13"])[df.id % 3].to_numpy()
    return _pandas("t.ingest", df.assign(date=arrived), ["date"])


def _utc_hours(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    return _pandas("t.hours", df.assign(date=day_in(df.ts, "UTC"), hour=hour_in(df.ts, "UTC")), ["date", "hour"])


def _tokyo_declared(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    rule = TimePartitions(day="date", hour="hour", zone=TOKYO)
    frame = df.assign(date=day_in(df.ts, TOKYO), hour=hour_in(df.ts, TOKYO))
    return _registered(tmp, "t.tokyo", frame, ["date", "hour"], time_column="ts", time_partitions=rule)


def _la_hours_undeclared(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    frame = df.assign(date=day_in(df.ts, LA), hour=hour_in(df.ts, LA))
    return _registered(tmp, "t.la_hours", frame, ["date", "hour"], time_column="ts")


def _epoch(tmp: Path, df: pd.DataFrame) -> dal.Dataset:
    """``ts=<epoch seconds of the hour>``: the window's column is the partition itself (exact, no rule needed)."""
    frame = df.drop(columns=["ts"]).assign(ts=epoch_hours(df.ts))
    return _registered(tmp, "t.epoch", frame, ["ts"], time_column="ts")


def epoch_hours(ts: pd.Series) -> pd.Series:
    return pd.Series([None if pd.isna(t) else int(t.floor("h").timestamp()) for t in ts], dtype="Int64")


LAYOUTS: dict[str, tuple[Callable[[Path, pd.DataFrame], dal.Dataset], TimePartitions | None]] = {
    "date=UTC": (_utc, TimePartitions("date", None, "UTC", "ts")),
    "date=LA, LA time column": (_la_aware, TimePartitions("date", None, LA, "ts")),
    "date=LA, UTC time column": (_la_days_utc_column, None),
    "ingestion dates": (_ingestion, None),
    "date=/hour= UTC": (_utc_hours, TimePartitions("date", "hour", "UTC", "ts")),
    "date=/hour= Tokyo, declared": (_tokyo_declared, TimePartitions("date", "hour", TOKYO, "ts")),
    "date=/hour= LA, registered": (_la_hours_undeclared, None),
    "ts=<epoch>": (_epoch, None),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_path_agrees_with_pandas(sqlite_env: Catalog, tmp_path: Path, layout: str) -> None:
    build, rule = LAYOUTS[layout]
    df = frame()
    ds = build(tmp_path, df)
    reference = df if layout != "ts=<epoch>" else df.assign(ts=epoch_hours(df.ts))
    version_rule = timeparts.rule_of(ds.version.properties, ds.info.properties)
    assert version_rule == rule
    files = len(ds.files())
    for window in WINDOWS:
        scan = ds.window(*window)
        check_paths(scan, expected(reference, window))
        if rule is None and ds.file_index() is None:  # nothing known: every file is planned (row groups prune)
            assert len(scan.query.files) == files, window
        elif rule is None:  # a Delta log's per-file min/max of the time column prune files (check_paths: exactly)
            assert len(scan.query.files) <= files, window
    if rule is not None:  # known: a 6-hour window reads the partitions of at most two days
        assert len(ds.window("2024-03-10T00:00", "2024-03-10T06:00").query.files) < files


def test_a_wrong_declaration_is_refused_when_dal_writes(sqlite_env: Catalog) -> None:
    """A declared rule is the dataset's: dal's writes keep it (a row that breaks it fails the write before its
    commit), so a dataset written by dal never holds rows its declaration would prune away."""
    df = frame()
    rule = TimePartitions(day="date", zone=LA)
    dal.write(df.assign(date=day_in(df.ts, LA)), "t.decl", partition_by=["date"], time_column="ts",
              time_partitions=rule)  # fmt: skip
    with pytest.raises(SchemaMismatch, match=r"break the declared time partitions \(date= day of ts in America"):
        dal.write(df.assign(date=day_in(df.ts, "UTC")), "t.decl")
    assert dal.open("t.decl").number == 0 and dal.open("t.decl").count() == ROWS
    with pytest.raises(SchemaMismatch, match="time_partitions name 'hour'"):
        dal.write(df.assign(date=day_in(df.ts, LA)), "t.decl2", partition_by=["date"], time_column="ts",
                  time_partitions=TimePartitions(day="date", hour="hour"))  # fmt: skip
    with pytest.raises(DalError, match="pass time_column= too"):
        dal.write(df, "t.decl3", time_partitions=TimePartitions(day="date"))
    with pytest.raises(DalError, match="unknown time zone 'Mars/Olympus'"):
        TimePartitions(day="date", zone="Mars/Olympus")
    with pytest.raises(DalError, match="must be a dal.TimePartitions"):
        dal.write(df, "t.decl3", time_column="ts", time_partitions={"day": "date"})  # type: ignore[arg-type]


def test_appends_keep_a_proven_rule_only_while_every_write_keeps_it(sqlite_env: Catalog) -> None:
    df = frame()
    la = df.assign(ts=df.ts.dt.tz_convert(LA), date=day_in(df.ts, LA))
    dal.write(la.iloc[:300], "t.app", partition_by=["date"], time_column="ts")
    rule = TimePartitions("date", None, LA, "ts")
    assert timeparts.rule_of(dal.open("t.app").version.properties, {}) == rule
    dal.write(la.iloc[300:400], "t.app")  # keeps it
    assert timeparts.rule_of(dal.open("t.app").version.properties, {}) == rule
    dal.write(la.iloc[400:].assign(date="2024-03-01"), "t.app")  # an ingestion date: not proven any more
    assert timeparts.rule_of(dal.open("t.app").version.properties, {}) is None
    dal.write(la.iloc[:10], "t.app")  # these rows keep it, but the version holds the ones that did not
    ds = dal.open("t.app")
    assert timeparts.rule_of(ds.version.properties, {}) is None
    whole = pd.concat([df, df.iloc[:10]])  # ids 0-9 twice
    for window in WINDOWS:
        check_paths(ds.window(*window), expected(whole, window))
    dal.write(la, "t.app", mode="overwrite")  # an overwrite holds only its own rows
    assert timeparts.rule_of(dal.open("t.app").version.properties, {}) == rule


def test_chained_windows_intersect(sqlite_env: Catalog) -> None:
    """window().window() replaced the first window (85,575 rows where the overlap held 28,521)."""
    df = frame()
    ds = _utc(Path(), df)
    a, b = ("2024-03-09T12:00", "2024-03-10T12:00"), ("2024-03-10T00:00", "2024-03-11T00:00")
    both = sorted(set(expected(df, a)) & set(expected(df, b)))
    check_paths(ds.window(*a).window(*b), both)
    check_paths(ds.window(*b).window(*a), both)
    assert ds.window(*a).window("2024-03-12", "2024-03-13").count() == 0  # disjoint: no row, as two filters
    assert ds.window(*a).window(None, "2024-03-10T00:00").count() == len(expected(df, (a[0], "2024-03-10T00:00")))
    # a window on another column narrows too (a filter beside the window on the time column)
    t2 = df.assign(t2=df.ts + pd.Timedelta(hours=30))
    dal.write(t2, "t.two", time_column="ts")
    two = dal.open("t.two").window(*a).window("2024-03-11T00:00", None, column="t2")
    assert ids(two) == sorted(set(expected(df, a)) & set(expected(t2, ("2024-03-11T00:00", None), "t2")))
    assert two.window_ is not None and two.window_.column == "ts" and len(two.filters) == 1


def test_open_windows(sqlite_env: Catalog) -> None:
    df = frame()
    ds = _utc(Path(), df)
    check_paths(ds.window("2024-03-11T20:00", None), expected(df, ("2024-03-11T20:00", None)))
    check_paths(ds.window(None, "2024-03-09T03:00"), expected(df, (None, "2024-03-09T03:00")))
    with pytest.raises(FilterError, match="window needs a start or an end"):
        ds.window(None, None)
    with pytest.raises(FilterError, match="empty window"):
        ds.window("2024-03-10", "2024-03-09")


def test_rule_intervals_cover_every_local_day_and_hour() -> None:
    """The UTC span of each partition value holds exactly the instants whose local day (hour) it is, through
    both of 2024's clock changes in Los Angeles and a 30-minute zone: checked minute by minute."""
    for zone in (LA, "Asia/Kolkata", "Australia/Lord_Howe"):
        minutes = pd.date_range("2024-03-09", "2024-03-12", freq="min", tz="UTC").append(
            pd.date_range("2024-11-02", "2024-11-05", freq="min", tz="UTC")
        )
        local = minutes.tz_convert(zone)
        frame_ = pd.DataFrame({"t": minutes, "day": local.strftime("%Y-%m-%d"), "hour": local.hour.astype(str)})
        rule = TimePartitions("day", "hour", zone, "t")
        for (day, hour), group in frame_.groupby(["day", "hour"]):  # every minute of the hour is inside its span
            lo, hi = rule.interval({"day": day, "hour": hour})  # type: ignore[misc]
            assert lo <= group.t.min().to_pydatetime() and group.t.max().to_pydatetime() < hi, (zone, day, hour)
        days = TimePartitions("day", None, zone, "t")
        for day, group in frame_.groupby("day"):  # and a day's span holds exactly that day's minutes
            lo, hi = days.interval({"day": day})  # type: ignore[misc]
            inside = frame_[(frame_.t >= lo) & (frame_.t < hi)]
            assert set(inside.day) == {day} and len(inside) == len(group), (zone, day)
        # and a batch check agrees with pandas' local days
        table = pa.Table.from_pandas(frame_.assign(hour=local.hour), preserve_index=False)
        assert rule.broken(table) == 0
        assert TimePartitions("day", "hour", "UTC", "t").broken(table) > 0
