"""Filters and windows on PARTITION columns, through every terminal that counts rows before reading them.

"Filter a date range, then shard across ranks": count, shard, split, to_torch(...).num_batches() and a
sharded to_torch failed with ``No match for FieldRef.Name(date)`` (the per-row-group fragments used for
counting were scanned without the dataset's schema), while to_arrow worked.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal import NdarrayCodec, ScalarCodec, TensorField, TensorSchema, col
from dal.catalog import Catalog
from dal.errors import FilterError

ROWS = 60
START = datetime(2026, 1, 1, tzinfo=UTC)


def ids_of(scan: dal.Scan) -> list[int]:
    return sorted(scan.select("id").to_arrow().column("id").to_pylist())


def check_terminals(scan: dal.Scan, expected: list[int]) -> None:
    """Every terminal agrees with ``expected`` (the ids the scan must yield)."""
    assert expected, "a case that selects nothing proves little"
    assert ids_of(scan) == expected
    assert scan.count() == len(expected)
    n = len(expected)
    for world in (2, 3):
        kept = [ids_of(scan.shard(r, world, "keep")) for r in range(world)]
        assert sorted(i for k in kept for i in k) == expected  # disjoint and covering
        for r in range(world):
            assert scan.shard(r, world, "keep").count() == len(kept[r])
            assert scan.shard(r, world).count() == len(ids_of(scan.shard(r, world))) == math.ceil(n / world)
            assert scan.shard(r, world, "drop").count() == n // world
        parts = [
            [i for b in scan.iter_batches(7, tasks=scan.split(p, world)) for i in b.column("id").to_pylist()]
            for p in range(world)
        ]
        assert sorted(i for p in parts for i in p) == expected
        assert [sum(scan.task_rows(scan.split(p, world))) for p in range(world)] == [len(p) for p in parts]


def check_torch(scan: dal.Scan, expected: list[int]) -> None:
    pytest.importorskip("torch")  # CI installs torch (dal[torch]); skipping fails the run there
    data = scan.select("id").to_torch(batch_size=4)
    batches = list(data)
    assert data.num_batches() == len(batches)
    assert sorted(int(i) for b in batches for i in b["id"]) == expected
    seen = []
    for rank in range(2):
        sharded = scan.select("id").shard(rank, 2, "keep").to_torch(batch_size=4)
        batches = list(sharded)
        assert sharded.num_batches() == len(batches)
        seen += [int(i) for b in batches for i in b["id"]]
    assert sorted(seen) == expected


@pytest.fixture
def delta(sqlite_env: Catalog) -> tuple[dal.Dataset, pd.DataFrame]:
    i = np.arange(ROWS)
    df = pd.DataFrame(
        {
            "id": i,
            "ts": pd.DatetimeIndex([START + timedelta(hours=2 * int(k)) for k in i]),
            "camera": [f"cam{k % 3}" for k in i],
            "v": i * 0.5,
        }
    )
    df["date"] = df.ts.dt.strftime("%Y-%m-%d")
    dal.write(df, "p.delta", partition_by=["date", "camera"], time_column="ts")
    return dal.open("p.delta"), df


@pytest.mark.parametrize(
    ("condition", "mask"),
    [
        ("date = '2026-01-02'", lambda d: d.date == "2026-01-02"),
        ("camera = 'cam1'", lambda d: d.camera == "cam1"),
        (col("camera").isin(["cam0", "cam2"]), lambda d: d.camera.isin(["cam0", "cam2"])),
        ("date >= '2026-01-02' AND date < '2026-01-04' AND camera <> 'cam0'",
         lambda d: (d.date >= "2026-01-02") & (d.date < "2026-01-04") & (d.camera != "cam0")),
        ("NOT (date = '2026-01-01') AND v > 10", lambda d: (d.date != "2026-01-01") & (d.v > 10)),
    ],
)  # fmt: skip
def test_delta_partition_filters_through_every_terminal(
    delta: tuple[dal.Dataset, pd.DataFrame], condition: object, mask: object
) -> None:
    ds, df = delta
    expected = sorted(df[mask(df)].id)  # type: ignore[operator]
    check_terminals(ds.filter(condition), expected)  # type: ignore[arg-type]


def test_delta_window_over_date_partitions_then_shard(delta: tuple[dal.Dataset, pd.DataFrame]) -> None:
    ds, df = delta
    scan = ds.scan().window("2026-01-02", "2026-01-03T12:00").filter("camera = 'cam1'")
    expected = sorted(
        df[(df.ts >= pd.Timestamp("2026-01-02", tz="UTC")) & (df.ts < pd.Timestamp("2026-01-03T12:00", tz="UTC"))]
        .loc[lambda d: d.camera == "cam1"]
        .id
    )
    check_terminals(scan, expected)
    check_torch(scan, expected)


def test_petastorm_partition_filter_through_every_terminal(sqlite_env: Catalog) -> None:
    schema = TensorSchema("Frames", [
        TensorField("id", np.int64, (), ScalarCodec()),
        TensorField("camera", np.str_, (), ScalarCodec()),
        TensorField("depth", np.float32, (2, 2), NdarrayCodec()),
    ])  # fmt: skip
    rows = [{"id": i, "camera": f"cam{i % 3}", "depth": np.full((2, 2), i, np.float32)} for i in range(ROWS)]
    dal.write(rows, "p.peta", format="petastorm", schema=schema, partition_by=["camera"])
    ds = dal.open("p.peta")
    expected = [i for i in range(ROWS) if i % 3 == 1]
    check_terminals(ds.filter("camera = 'cam1'"), expected)
    check_terminals(ds.filter(col("camera") != "cam1"), [i for i in range(ROWS) if i % 3 != 1])
    check_torch(ds.filter("camera = 'cam1' AND id > 10"), [i for i in expected if i > 10])


def test_window_over_epoch_second_partitions_then_shard(sqlite_env: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "epoch"
    for h in range(6):  # ts=<epoch seconds> directories, one per hour; ts is only in the path
        t0 = int((START + timedelta(hours=h)).timestamp())
        (root / f"ts={t0}").mkdir(parents=True)
        ids = list(range(h * 10, h * 10 + 10))
        pq.write_table(pa.table({"id": ids}), root / f"ts={t0}" / "p.parquet", row_group_size=4)
    dal.register("p.epoch", str(root), format="parquet", time_column="ts")
    scan = dal.open("p.epoch").window("2026-01-01T01:00", "2026-01-01T03:00")
    assert len({t.uri for t in scan.plan()}) == 2  # two hour directories, the others pruned
    check_terminals(scan, list(range(10, 30)))
    check_torch(scan, list(range(10, 30)))


def test_split_arguments_are_checked(delta: tuple[dal.Dataset, pd.DataFrame]) -> None:
    scan = delta[0].filter("camera = 'cam1'")
    with pytest.raises(FilterError, match="parts must be a positive int"):
        scan.split(0, 0)
    with pytest.raises(FilterError, match=r"index must be in \[0, 2\)"):
        scan.split(2, 2)
