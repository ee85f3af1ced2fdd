"""A declared time-partition rule and commits no dal write checked: ``sync`` drops the rule (with a warning), so
a window filters rows instead of skipping the partition a foreign row sits in against the rule (it returned 0
rows where the equivalent filter returned the row)."""

from __future__ import annotations

import logging

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import write_deltalake

import dal
from dal import TimePartitions
from dal.catalog import Catalog
from dal.storage import timeparts


def _frame(ts: list[str], dates: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"id": range(len(ts)), "ts": pd.to_datetime(ts, utc=True), "date": dates})


def test_a_foreign_commit_against_the_declared_rule_drops_it_and_windows_stay_exact(
    sqlite_env: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    df = _frame(["2024-03-10T01:00", "2024-03-11T01:00"], ["2024-03-10", "2024-03-11"])
    dal.write(df, "t.rule", partition_by=["date"], time_column="ts", time_partitions=TimePartitions(day="date"))
    location = sqlite_env.get_dataset("t.rule").location
    # another tool appends a row of 2024-03-10 into the 2024-03-11 partition: the rule does not hold for it
    stray = pa.Table.from_pandas(_frame(["2024-03-10T12:00"], ["2024-03-11"]), preserve_index=False)
    write_deltalake(location, stray.set_column(0, "id", pa.array([7], pa.int64())), mode="append")
    with caplog.at_level(logging.WARNING, logger="dal"):
        dal.sync("t.rule")
    assert "did not check the declared time partitions" in caplog.text
    assert timeparts.DATASET_KEY not in sqlite_env.get_dataset("t.rule").properties
    ds = dal.open("t.rule")
    window = sorted(ds.window("2024-03-10", "2024-03-11").to_pandas()["id"])
    by_filter = sorted(ds.filter("ts >= '2024-03-10T00:00:00Z' AND ts < '2024-03-11T00:00:00Z'").to_pandas()["id"])
    assert window == by_filter == [0, 7]


def test_dal_writes_of_the_same_catalog_keep_the_rule(sqlite_env: Catalog) -> None:
    df = _frame(["2024-03-10T01:00"], ["2024-03-10"])
    dal.write(df, "t.keep", partition_by=["date"], time_column="ts", time_partitions=TimePartitions(day="date"))
    dal.write(_frame(["2024-03-12T01:00"], ["2024-03-12"]), "t.keep")
    assert timeparts.DATASET_KEY in sqlite_env.get_dataset("t.keep").properties
