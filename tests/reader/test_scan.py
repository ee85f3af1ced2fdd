"""Projection, windows, sharding, shuffling, epochs, sequences and bad input of the Scan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dal
from dal.catalog import Catalog
from dal.errors import FilterError
from dal.read.sharding import assign, share
from tests.reader.conftest import START, STEP


def flat(lists: list[list[int]]) -> list[int]:
    return [x for sub in lists for x in sub]


def ids(scan: dal.Scan) -> list[int]:
    return scan.select("id").to_arrow().column("id").to_pylist()


def test_projection_reads_only_those_columns(plain: dal.Dataset) -> None:
    t = plain.select("id", "label").to_arrow()
    assert t.column_names == ["id", "label"] and t.num_rows == 2000
    assert plain.select("id").bytes_planned() < plain.scan().bytes_planned() / 3
    with pytest.raises(FilterError, match="unknown column 'lable' in select of r.plain; did you mean 'label'"):
        plain.select("id", "lable")


def test_window_is_half_open_and_prunes_partitions(plain: dal.Dataset, rows: pd.DataFrame) -> None:
    w = plain.window("2026-01-02", "2026-01-03")
    got = sorted(ids(w))
    lo, hi = pd.Timestamp("2026-01-02T00:00Z"), pd.Timestamp("2026-01-03T00:00Z")
    assert got == sorted(rows[(rows.ts >= lo) & (rows.ts < hi)].id)
    assert {t.partition_values for t in w.plan()} == {(("date", "2026-01-02"),)}
    # an instant exactly at the end is excluded, exactly at the start included
    exact = rows.ts.iloc[500].to_pydatetime()
    assert ids(plain.window(exact, exact + timedelta(seconds=1))) == [500]
    assert ids(plain.window(exact - timedelta(seconds=1), exact)) == []
    # the same instants in another time zone select the same rows
    plus5 = timezone(timedelta(hours=5))
    assert (
        sorted(ids(plain.window(datetime(2026, 1, 2, 5, tzinfo=plus5), datetime(2026, 1, 3, 5, tzinfo=plus5)))) == got
    )
    # narrow windows read a fraction of the bytes
    assert plain.window("2026-01-02", "2026-01-02T01:00").bytes_planned() < plain.scan().bytes_planned() / 15


def test_window_bad_input(plain: dal.Dataset, env: Catalog) -> None:
    with pytest.raises(FilterError, match="empty window"):
        plain.window("2026-01-03", "2026-01-03")
    with pytest.raises(FilterError, match="unknown column 'tss'"):
        plain.window("2026-01-01", "2026-01-02", column="tss")
    with pytest.raises(FilterError, match="must be a timestamp"):
        plain.window("2026-01-01", "2026-01-02", column="station")
    with pytest.raises(FilterError, match="not an ISO date"):
        plain.window("soon", "2026-01-02")


def test_hour_and_epoch_partitions_are_pruned(env: Catalog, tmp_path: Path) -> None:
    hourly, epoch = tmp_path / "hourly", tmp_path / "epoch"
    for h in range(24):
        t0 = datetime(2026, 1, 1, h, tzinfo=UTC)
        table = pa.table(
            {
                "ts": pa.array([t0 + timedelta(minutes=m) for m in range(0, 60, 10)], pa.timestamp("us", tz="UTC")),
                "v": list(range(6)),
            }
        )
        (hourly / "date=2026-01-01" / f"hour={h}").mkdir(parents=True)
        pq.write_table(table, hourly / "date=2026-01-01" / f"hour={h}" / "p.parquet")
        (epoch / f"ts_hour={int(t0.timestamp())}").mkdir(parents=True)
        pq.write_table(table.rename_columns(["t", "v"]), epoch / f"ts_hour={int(t0.timestamp())}" / "p.parquet")
    dal.register("r.hourly", str(hourly), format="parquet", time_column="ts")
    w = dal.open("r.hourly").window("2026-01-01T05:30", "2026-01-01T07:00")
    assert {dict(t.partition_values)["hour"] for t in w.plan()} == {"5", "6"}
    assert w.count() == 3 + 6
    dal.register("r.epoch", str(epoch), format="parquet")
    e = dal.open("r.epoch").window("2026-01-01T05:30", "2026-01-01T07:00", column="ts_hour")
    assert len(e.plan()) == 1  # epoch-second partitions: only hour 6 starts inside the window


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=0, max_size=12), st.integers(1, 9), st.sampled_from(["pad", "drop", "keep"])
)
def test_sharding_properties(counts: list[int], world: int, remainder: str) -> None:
    total = sum(counts)
    per_rank = []
    for rank in range(world):
        pieces = assign(counts, share(total, rank, world, remainder))  # type: ignore[arg-type]
        rows = [(i, o + k) for i, o, n in pieces for k in range(n)]
        assert all(0 <= o and o + n <= counts[i] for i, o, n in pieces)
        per_rank.append(rows)
    sizes = [len(r) for r in per_rank]
    everything = {(i, k) for i, c in enumerate(counts) for k in range(c)}
    union = set().union(*map(set, per_rank))
    if remainder == "keep":
        assert sum(sizes) == total and union == everything and max(sizes) - min(sizes) <= 1
    elif remainder == "pad":
        assert len(set(sizes)) == 1 and union == everything and sizes[0] * world - total < world
    else:
        assert len(set(sizes)) == 1 and sizes[0] == total // world and len(union) == sum(sizes)
    if remainder != "pad":  # disjoint
        assert len(union) == sum(sizes)


@pytest.mark.parametrize("world", [1, 2, 3, 8])
def test_scan_shards_are_equal_disjoint_and_covering(plain: dal.Dataset, world: int) -> None:
    flt = dal.col("label") != 2
    shards = [ids(plain.filter(flt).shard(r, world, "keep")) for r in range(world)]
    expected = sorted(ids(plain.filter(flt)))
    assert sorted(flat(shards)) == expected and len(set(flat(shards))) == len(expected)
    padded = [plain.filter(flt).shard(r, world).count() for r in range(world)]
    assert len(set(padded)) == 1 and padded[0] == -(-len(expected) // world)


def test_more_ranks_than_row_groups_split_inside_row_groups(env: Catalog, tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    pq.write_table(pa.table({"id": list(range(10))}), tmp_path / "one" / "p.parquet")
    dal.register("r.one", str(tmp_path / "one"), format="parquet")
    ds = dal.open("r.one")
    assert len(ds.scan().plan()) == 1
    shards = [ids(ds.shard(r, 4)) for r in range(4)]
    assert [len(s) for s in shards] == [3, 3, 3, 3] and set(flat(shards)) == set(range(10))
    keep = [ids(ds.shard(r, 4, "keep")) for r in range(4)]
    assert sorted(flat(keep)) == list(range(10))


def test_shuffle_is_deterministic_per_seed_and_epoch_on_every_rank(plain: dal.Dataset) -> None:
    base = plain.shuffle(seed=3, buffer_size=300)
    first, again, other_epoch = ids(base), ids(base), ids(base.set_epoch(1))
    assert first == again and first != other_epoch and sorted(first) == list(range(2000))
    assert first != sorted(first) and ids(plain.shuffle(seed=4)) != first
    # each rank's plan comes from the same permutation: shards stay disjoint and cover all rows
    world = 3
    shards = [ids(plain.shuffle(seed=3).set_epoch(5).shard(r, world, "keep")) for r in range(world)]
    assert sorted(flat(shards)) == list(range(2000))
    assert shards == [ids(plain.shuffle(seed=3).set_epoch(5).shard(r, world, "keep")) for r in range(world)]


def test_batches_epochs_and_empty_results(plain: dal.Dataset) -> None:
    batches = list(plain.select("id").iter_batches(300))
    assert [b.num_rows for b in batches] == [300] * 6 + [200]
    two = list(plain.select("id").shuffle(1).iter_batches(500, num_epochs=2))
    ids_two = [i for b in two for i in b.column("id").to_pylist()]
    assert len(ids_two) == 4000 and ids_two[:2000] != ids_two[2000:] and sorted(ids_two[2000:]) == list(range(2000))
    empty = plain.filter("label > 100")
    assert empty.count() == 0 and list(empty.iter_batches()) == [] and empty.select("id").to_arrow().num_rows == 0
    assert empty.to_arrow().schema.names == plain.scan().arrow_schema.names
    assert [empty.shard(r, 3).count() for r in range(3)] == [0, 0, 0]
    with pytest.raises(FilterError, match="rank must be in \\[0, 3\\)"):
        plain.shard(3, 3)
    with pytest.raises(FilterError, match="world_size"):
        plain.shard(0, 0)


def test_sequences_respect_entities_and_gaps(env: Catalog) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for station in ("A", "B"):
        for k in range(6):
            gap = timedelta(hours=5) if k >= 3 else timedelta(0)  # a 5 h hole after the 3rd reading
            rows.append({"station": station, "ts": t0 + timedelta(minutes=10 * k) + gap, "v": k})
    dal.write(pd.DataFrame(rows), "r.seq", time_column="ts")
    ds = dal.open("r.seq")
    windows = list(ds.sequences(2, by="station"))
    assert len(windows) == 10 and all(w.num_rows == 2 for w in windows)
    assert all(len(set(w.column("station").to_pylist())) == 1 for w in windows)  # never across entities
    gapped = list(ds.sequences(2, by="station", max_gap=timedelta(hours=1)))
    assert len(gapped) == 8  # no window spans the hole
    assert all(np.diff(w.column("ts").cast(pa.int64()).to_numpy()).max() <= 3600 * 10**6 for w in gapped)
    stepped = list(ds.sequences(3, step=3, by="station"))
    assert [w.column("v").to_pylist() for w in stepped] == [[0, 1, 2], [3, 4, 5]] * 2
    assert list(ds.filter("v > 100").sequences(2)) == []
    with pytest.raises(FilterError, match="length must be >= 1"):
        list(ds.sequences(0))
    assert START + STEP > START  # the shared fixture's clock is used by the other tests


def test_plan_cache_is_bounded(plain: dal.Dataset) -> None:
    from dal.scan import PLAN_CACHE

    for k in range(PLAN_CACHE + 8):  # a process trying many filters keeps a bounded number of plans
        assert plain.filter(dal.col("id") < k).count() == k
    assert len(plain.plan_cache) == PLAN_CACHE
    assert plain.filter(dal.col("id") < 3).count() == 3  # evicted plans are planned again
