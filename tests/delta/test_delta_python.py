"""Delta datasets written from pandas / Arrow: versions recorded in full, time travel, bad input refused."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import deltalake
import pandas as pd
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DatasetExists, FormatError, SchemaMismatch, TagExists, VersionNotFound


def frame(n: int, start: int = 0, days: int = 3) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "date": [f"2026-01-0{1 + (i % days)}" for i in range(start, start + n)],
            "id": range(start, start + n),
            "x": [float(i) / 2 for i in range(start, start + n)],
            "ts": pd.date_range("2026-01-01", periods=n, freq="min", tz="UTC") + pd.Timedelta(minutes=start),
        }
    )


def ids(ds: dal.Dataset) -> list[int]:
    return sorted(ds.to_arrow().column("id").to_pylist())


def snapshot(cat: Catalog, location: str) -> tuple[object, ...]:
    """Everything a failed write must leave untouched: catalog state, the Delta log, the data files."""
    log = sorted(os.listdir(os.path.join(location, "_delta_log")))
    files = sorted(str(p.relative_to(location)) for p in Path(location).rglob("*.parquet"))
    return (
        [d.to_dict() for d in cat.list_datasets()],
        [v.to_dict(with_schema=True) for d in cat.list_datasets() for v in cat.versions(d.name)],
        log,
        files,
        deltalake.DeltaTable(location).version(),
    )


def test_write_records_every_detail(cat: Catalog) -> None:
    v0 = dal.write(frame(30), "weather.obs", partition_by=["date"], time_column="ts", description="obs", tags=["first"])
    assert (v0.number, v0.storage_version, v0.operation, v0.row_count) == (0, 0, "create", 30)
    assert v0.partition_columns == ("date",) and v0.tags == ("first",)
    assert v0.file_count == 3 and v0.size_bytes > 0
    assert v0.schema.names == ("date", "id", "x", "ts")
    info = cat.get_dataset("weather.obs")
    assert info.format == "delta" and info.time_column == "ts" and info.description == "obs"
    assert info.location == os.path.join(os.environ["DAL_WAREHOUSE"], "weather.obs")
    parts = cat.partitions("weather.obs", 0)
    assert [(p.key, p.row_count, p.file_count) for p in parts] == [
        ("date=2026-01-01", 10, 1),
        ("date=2026-01-02", 10, 1),
        ("date=2026-01-03", 10, 1),
    ]
    assert sum(p.size_bytes for p in parts) == v0.size_bytes
    v1 = dal.write(pa.Table.from_pandas(frame(6, 30, days=4), preserve_index=False), "weather.obs")
    assert (v1.number, v1.storage_version, v1.operation, v1.row_count, v1.file_count) == (1, 1, "append", 36, 7)
    assert [p.key for p in cat.partitions("weather.obs", 1)][-1] == "date=2026-01-04"


def test_every_input_kind(cat: Catalog) -> None:
    t = pa.Table.from_pandas(frame(8), preserve_index=False)
    dal.write(frame(8), "k.pandas")
    dal.write(t, "k.table")
    dal.write(t.to_batches()[0], "k.batch")
    dal.write(t.to_reader(), "k.reader")
    dal.write(t.to_batches(max_chunksize=3), "k.batches")
    for name in ["k.pandas", "k.table", "k.batch", "k.reader", "k.batches"]:
        assert dal.open(name).to_arrow().sort_by("id").to_pylist() == t.sort_by("id").to_pylist(), name
    with pytest.raises(dal.DalError, match="cannot write dict"):
        dal.write({"a": [1]}, "k.dict")
    assert "k.dict" not in [d.name for d in cat.list_datasets()]


def test_pinned_versions_never_change(cat: Catalog) -> None:
    dal.write(frame(10), "pin.ds", partition_by=["date"])
    dal.write(frame(10, 10), "pin.ds")
    pinned = dal.open("pin.ds", 1)
    before = pinned.to_arrow().sort_by("id")
    for i in range(3):
        dal.write(frame(5, 100 + 10 * i), "pin.ds")
    # overwrite only one partition (predicate) and then vacuum: files of other versions' rewrites go,
    # but nothing version 1 pins is touched
    table = deltalake.DeltaTable(pinned.location)
    deltalake.write_deltalake(
        table, pa.Table.from_pandas(frame(3, 500, days=1).assign(date="2026-01-09"), preserve_index=False),
        mode="overwrite", predicate="date = '2026-01-09'",
    )  # fmt: skip
    dal.sync("pin.ds")
    dal.write(frame(4, 600, days=1).assign(date="2026-01-09"), "pin.ds", mode="append")
    vacuumed = deltalake.DeltaTable(pinned.location).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert not any("date=2026-01-0" + d in f for f in vacuumed for d in "123"), vacuumed
    again = dal.open("pin.ds", 1)
    assert again.to_arrow().sort_by("id").equals(before)
    assert again.version == pinned.version
    # a full overwrite replaces what later versions see; version 1 still reads from its own files
    latest = dal.write(frame(2, 900), "pin.ds", mode="overwrite")
    assert latest.operation == "overwrite" and latest.row_count == 2
    assert ids(dal.open("pin.ds")) == [900, 901]
    assert dal.open("pin.ds", 1).to_arrow().sort_by("id").equals(before)


def test_time_travel_by_number_tag_and_timestamp(cat: Catalog) -> None:
    dal.write(frame(3), "tt.ds", tags=["v-one"])
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    dal.write(frame(3, 3), "tt.ds")
    assert ids(dal.open("tt.ds", 0)) == [0, 1, 2]
    assert ids(dal.open("tt.ds", "v-one")) == [0, 1, 2]
    assert ids(dal.open("tt.ds", between)) == [0, 1, 2]
    assert ids(dal.open("tt.ds", between.isoformat())) == [0, 1, 2]
    assert ids(dal.open("tt.ds")) == list(range(6))
    with pytest.raises(VersionNotFound, match="versions are 0..1"):
        dal.open("tt.ds", 5)
    with pytest.raises(VersionNotFound, match="did you mean 'v-one'"):
        dal.open("tt.ds", "v-onee")
    with pytest.raises(VersionNotFound, match="first version is from"):
        dal.open("tt.ds", between - timedelta(days=1))
    with pytest.raises(dal.errors.DatasetNotFound, match="did you mean 'tt.ds'"):
        dal.open("tt.dss")


def test_iter_batches_and_pandas(cat: Catalog) -> None:
    dal.write(frame(1000), "it.ds", partition_by=["date"])
    ds = dal.open("it.ds")
    batches = list(ds.iter_batches(batch_size=128))
    assert all(b.num_rows <= 128 for b in batches)
    assert sorted(i for b in batches for i in b.column("id").to_pylist()) == list(range(1000))
    assert set(batches[0].schema.names) == {"date", "id", "x", "ts"}
    df = ds.to_pandas()
    assert len(df) == 1000 and set(df["date"]) == {"2026-01-01", "2026-01-02", "2026-01-03"}
    assert ds.count() == 1000


def test_incompatible_append_is_refused_and_nothing_changes(cat: Catalog) -> None:
    dal.write(frame(10), "bad.ds", partition_by=["date"])
    location = cat.get_dataset("bad.ds").location
    before = snapshot(cat, location)
    cases = [
        (frame(2).assign(x="text"), "x \\(double -> (large_)?string\\)"),
        # (data without the nullable column x is accepted: tests/writes/test_missing_columns.py)
        (frame(2).assign(extra=1), "new columns: extra \\(pass schema_mode='merge'"),
        (frame(2).rename(columns={"x": "X"}), "new columns: X "),
    ]
    for data, message in cases:
        with pytest.raises(SchemaMismatch, match=message):
            dal.write(data, "bad.ds")
    with pytest.raises(SchemaMismatch, match="partitioned by \\['date'\\], not \\['id'\\]"):
        dal.write(frame(2), "bad.ds", partition_by=["id"])
    with pytest.raises(SchemaMismatch, match="not a column"):
        dal.write(frame(2), "bad.ds", time_column="nope")
    with pytest.raises(dal.DalError, match="needs mode='overwrite'"):
        dal.write(frame(2), "bad.ds", schema_mode="overwrite")
    cat.tag("bad.ds", 0, "prod")
    before = snapshot(cat, location)
    with pytest.raises(TagExists, match="prod"):
        dal.write(frame(2), "bad.ds", tags=["prod"])
    assert snapshot(cat, location) == before


def test_schema_evolution_needs_merge_and_is_its_own_version(cat: Catalog) -> None:
    dal.write(frame(4), "evo.ds")
    v1 = dal.write(frame(2, 4).assign(quality=0.5), "evo.ds", schema_mode="merge")
    assert v1.operation == "schema-change" and v1.schema.names[-1] == "quality"
    d = cat.diff("evo.ds", 0, 1)
    assert [f.name for f in d.added] == ["quality"] and not d.removed
    t = dal.open("evo.ds").to_arrow().sort_by("id")
    assert t.column("quality").to_pylist() == [None] * 4 + [0.5, 0.5]
    assert dal.open("evo.ds", 0).to_arrow().column_names == ["date", "id", "x", "ts"]
    v2 = dal.write(frame(3).drop(columns=["x"]), "evo.ds", mode="overwrite", schema_mode="overwrite")
    assert v2.operation == "overwrite" and "x" not in v2.schema.names
    assert [f.name for f in cat.diff("evo.ds", 1, 2).removed] == ["x", "quality"]


def test_write_to_existing_unregistered_table_is_refused(cat: Catalog, tmp_path: Path) -> None:
    where = tmp_path / "foreign"
    deltalake.write_deltalake(str(where), pa.table({"a": [1, 2]}))
    with pytest.raises(DatasetExists, match="dal.register"):
        dal.write(frame(2), "foreign.ds", path=str(where))
    assert deltalake.DeltaTable(str(where)).version() == 0 and cat.list_datasets() == []


def test_a_file_removed_under_a_pinned_version_is_a_clear_error(cat: Catalog) -> None:
    dal.write(frame(5), "gone.ds")
    ds = dal.open("gone.ds")
    os.remove(ds.files()[0].uri)
    with pytest.raises(FormatError, match="no longer readable.*VACUUM"):
        ds.to_arrow()
