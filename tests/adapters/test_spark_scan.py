"""Scan.to_spark: the pinned version with projection and filters pushed into Spark's Parquet scan."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import dal
from dal.catalog import Catalog

pytestmark = pytest.mark.spark


def test_filters_and_projection_are_pushed_into_spark(sqlite_env: Catalog, spark: Any) -> None:
    df = pd.DataFrame({"id": range(300), "station": ["YUL", "YYZ", "YVR"] * 100, "label": [i % 4 for i in range(300)],
                       "ts": pd.date_range("2026-01-01", periods=300, freq="h", tz="UTC")})  # fmt: skip
    df["date"] = df.ts.dt.strftime("%Y-%m-%d")
    dal.write(df, "s.rows", partition_by=["date"], time_column="ts")
    dal.write(df.assign(id=df.id + 1000), "s.rows")  # a later version the pinned scan must not see
    scan = (
        dal.open("s.rows", 0)
        .filter("station = 'YUL' AND label >= 2")
        .window("2026-01-02", "2026-01-05")
        .select("id", "station")
    )
    sdf = scan.to_spark(spark)
    assert sdf.columns == ["id", "station"]
    assert sorted(r["id"] for r in sdf.collect()) == sorted(scan.to_arrow().column("id").to_pylist())
    assert len(sdf.collect()) > 0 and all(r["id"] < 1000 for r in sdf.collect())
    plan = sdf._jdf.queryExecution().executedPlan().toString()
    assert "PushedFilters" in plan and "station" in plan.split("PushedFilters", 1)[1].split("]", 1)[0]
    assert "PartitionFilters" in plan or "date" in plan  # the window prunes day partitions in Spark too
