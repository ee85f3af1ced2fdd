"""Petastorm datasets written by Spark executors (encode + write), committed once by the driver."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dal
from dal.catalog import Catalog
from dal.errors import SchemaMismatch
from tests.petastorm.legacy import run_legacy
from tests.petastorm.test_petastorm_dataset import SCHEMA

# through dal serve with SQLite behind it (not also PostgreSQL: a Spark job costs seconds, the server the same)
pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.parametrize("sqlite_or_served", ["sqlite", "served"], indirect=True),
]


def spark_frames(spark: Any, n: int, bad_row: int | None = None) -> Any:
    rows = []
    for i in range(n):
        depth = np.full((4, 5 if i == bad_row else 4), i / 2, np.float32)
        rgb = np.full((6, 8, 3), i % 256, np.uint8)
        rows.append((i, f"cam{i % 3}", depth.tolist(), rgb.tolist()))
    schema = "id long, camera string, depth array<array<float>>, rgb array<array<array<int>>>"
    return spark.createDataFrame(rows, schema).repartition(3)


def test_spark_writes_petastorm_that_dal_and_petastorm_read(cat: Catalog, spark: Any, tmp_path: Path) -> None:
    v = dal.write(spark_frames(spark, 30), "spark.frames", format="petastorm", schema=SCHEMA, partition_by=["camera"])
    assert (v.number, v.row_count, v.partition_columns) == (0, 30, ("camera",))
    assert v.file_count >= 3  # several executor tasks wrote files
    got = dal.open("spark.frames").to_numpy()
    order = np.argsort(got["id"])
    assert list(got["id"][order]) == list(range(30))
    np.testing.assert_array_equal(got["depth"][order][7], np.full((4, 4), 3.5, np.float32))
    np.testing.assert_array_equal(got["rgb"][order][9], np.full((6, 8, 3), 9, np.uint8))
    out = tmp_path / "read.npz"
    proc = run_legacy("petastorm_read.py", dal.open("spark.frames").petastorm_url, str(out))
    assert proc.returncode == 0 and "MAKE_READER 30" in proc.stdout, proc.stderr[-3000:]
    read = np.load(out)
    np.testing.assert_array_equal(read["row/depth/7"], np.full((4, 4), 3.5, np.float32))
    np.testing.assert_array_equal(read["row/rgb/9"], np.full((6, 8, 3), 9, np.uint8))


def test_a_bad_row_fails_the_job_and_commits_nothing(cat: Catalog, spark: Any) -> None:
    with pytest.raises(SchemaMismatch, match=r"field 'depth', row \d+: expected shape \(4, 4\), got \(4, 5\)"):
        dal.write(spark_frames(spark, 12, bad_row=5), "spark.bad", format="petastorm", schema=SCHEMA)
    assert cat.list_datasets() == []
    location = os.path.join(os.environ["DAL_WAREHOUSE"], "spark.bad")
    assert not os.path.exists(location) or [n for n in os.listdir(location) if not n.startswith("_")] == []
