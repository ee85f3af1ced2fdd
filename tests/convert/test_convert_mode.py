"""``dal.convert(df, name=...)`` has ``mode=`` (issue 23, item 7): ``'overwrite'`` by default, so running the same
job again gives a version with the same rows (it appended them a second time before: the barrier example's own
check reported 998 rows read twice on its second run); ``'append'`` adds them on request. The barrier example runs
twice here and no row is read twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dal
from dal.catalog import Catalog
from dal.errors import DalError
from tests.convert.test_examples import example

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def test_convert_overwrites_by_default_and_appends_on_request(spark: Any, sqlite_env: Catalog) -> None:
    df = spark.range(0, 40, numPartitions=2).selectExpr("id", "cast(id as double) / 2 as y")
    first = dal.convert(df, name="conv.t")
    again = dal.convert(df, name="conv.t")
    assert (first.number, again.number) == (0, 1)
    assert sorted(again.to_arrow().column("id").to_pylist()) == list(range(40))  # not 80 rows
    assert sqlite_env.version("conv.t", 1).operation == "overwrite"
    assert sorted(dal.open("conv.t", 0).to_arrow().column("id").to_pylist()) == list(range(40))
    more = dal.convert(df, name="conv.t", mode="append")
    assert more.count() == 80 and sqlite_env.version("conv.t", 2).operation == "append"
    with pytest.raises(DalError, match="mode must be 'append' or 'overwrite', not 'error'"):
        dal.convert(df, name="conv.t", mode="error")  # type: ignore[arg-type]
    with pytest.raises(DalError, match="mode= applies to name= writes"):
        dal.convert(df, mode="append")
    assert [v.number for v in sqlite_env.versions("conv.t")] == [0, 1, 2]


@pytest.mark.slow
def test_the_barrier_example_run_twice_reads_no_row_twice(spark: Any, sqlite_env: Catalog) -> None:
    run = example("spark_barrier_train").run
    first = run(spark, "ex.twice", rows=101, world=2, epochs=1, batch_size=20)
    second = run(spark, "ex.twice", rows=101, world=2, epochs=1, batch_size=20)
    assert (first["version"], second["version"]) == (0, 1)
    assert first["rows_seen_twice"] == second["rows_seen_twice"] == 0
    assert second["rows_per_rank"] == [50, 50] and dal.open("ex.twice").count() == 101


def test_convert_stays_callable_after_infer_schema_is_loaded_first() -> None:
    """``dal.infer_schema`` imports the module ``dal.convert``, which Python binds on the package under the same
    name as the function: ``dal.convert(...)`` then called the module."""
    code = "import dal; dal.infer_schema; assert callable(dal.convert), dal.convert; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
