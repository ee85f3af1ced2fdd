"""gc against Spark writes in flight (issue #22), Delta and Petastorm: the driver paused at every step of the
write (``DAL_TEST_PAUSE``, on a thread of this process: the Spark session is this process's), its staged files
aged two hours, against gc with ``safe_age`` 0 expiring all but the newest version. No row lost, no version with
a missing file, the dataset still writable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dal
from dal.catalog import Catalog
from dal.ops import lifecycle
from tests.faults.conftest import SQLITE_ONLY
from tests.faults.races import NEW, NOW, check, files_below, history
from tests.faults.spark_races import age, frame, in_thread, paused, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow, SQLITE_ONLY]  # Spark jobs: not also through dal serve (CI time)


POINTS = [
    ("delta", "intent-registered"),
    ("delta", "spark-files-staged"),
    ("delta", "after-storage-commit"),
    ("petastorm", "intent-registered"),
    ("petastorm", "spark-files-staged"),
    ("petastorm", "petastorm-metadata-written"),
    ("petastorm", "record-written"),
    ("petastorm", "after-storage-commit"),
]


@pytest.mark.parametrize(("fmt", "point"), POINTS)
def test_gc_against_a_spark_write_paused_at_each_step_loses_nothing(
    cat: Catalog, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str, point: str
) -> None:
    name = f"sparkrace.{fmt}"
    before = history(name, fmt)
    location = cat.get_dataset(name).location
    marker, release = paused(monkeypatch, tmp_path, point)
    df = frame(spark, fmt, NEW)
    with in_thread(lambda: dal.write(df, name, format=fmt)) as out:
        try:
            wait_for(marker.exists, out, f"paused at {point}")
            staged = {f for f in files_below(location) if f.endswith(".parquet")}
            age(staged, location, 7200)  # and old: only the intent protects what the write staged
            lifecycle.gc(name, keep_last=1, safe_age=NOW)
        finally:
            release.touch()
    monkeypatch.delenv("DAL_TEST_PAUSE")
    assert "error" not in out, out.get("error")
    assert check(cat, name, [*before, *NEW]) == 0
