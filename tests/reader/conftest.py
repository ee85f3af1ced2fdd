from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dal
from dal.catalog import Catalog

ROWS = 2000
START = datetime(2026, 1, 1, tzinfo=UTC)
STEP = timedelta(minutes=7)


def frame() -> pd.DataFrame:
    i = np.arange(ROWS)
    ts = pd.DatetimeIndex([START + k * STEP for k in range(ROWS)])
    return pd.DataFrame(
        {
            "id": i,
            "ts": ts,
            "station": pd.array([None if k % 17 == 0 else ["YUL", "YYZ", "YVR"][k % 3] for k in i], dtype="object"),
            "label": i % 5,
            "x": [None if k % 11 == 0 else float(k) / 10 for k in i],
            "date": ts.strftime("%Y-%m-%d"),
        }
    )


@pytest.fixture
def env(sqlite_env: Catalog) -> Catalog:
    return sqlite_env


@pytest.fixture
def rows() -> pd.DataFrame:
    return frame()


@pytest.fixture
def plain(env: Catalog, tmp_path: Path, rows: pd.DataFrame) -> dal.Dataset:
    """Hive-partitioned by date, 50-row row groups: many row groups with known statistics."""
    root = tmp_path / "plain"
    for day, part in rows.groupby("date"):
        (root / f"date={day}").mkdir(parents=True)
        table = pa.Table.from_pandas(part.drop(columns=["date"]), preserve_index=False)
        pq.write_table(table, root / f"date={day}" / "part-0.parquet", row_group_size=50)
    dal.register("r.plain", str(root), format="parquet", time_column="ts")
    return dal.open("r.plain")
