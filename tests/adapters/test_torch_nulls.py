"""Nulls in to_torch: a chunk holding a null integer/bool/timestamp used to arrive as float64 with NaN
(INT64_MIN, objects) while other chunks were int64, so a column's tensor type changed from batch to batch.
Now a DalError naming the column (as to_tf), raised by to_torch() itself (footer statistics; issue #23
item 9: it came mid-epoch); floats keep NaN, strings keep None."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pytest

torch = pytest.importorskip("torch")

import dal  # noqa: E402
from dal.catalog import Catalog  # noqa: E402
from dal.errors import DalError  # noqa: E402


@pytest.mark.parametrize(
    "column",
    [
        pa.array([1, None, 3], pa.int64()),
        pa.array([True, None, False], pa.bool_()),
        pa.array([datetime(2026, 1, 1), None, datetime(2026, 1, 2)], pa.timestamp("us")),
    ],
    ids=["int", "bool", "timestamp"],
)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_null_a_tensor_cannot_hold_is_a_clear_error(sqlite_env: Catalog, column: pa.Array, workers: int) -> None:
    clean = pa.table({"id": pa.array([0, 1, 2]), "c": pa.array([column[0].as_py()] * 3, column.type)})
    dal.write(clean, "n.t")  # a first file without nulls: its chunk converts fine
    dal.write(pa.table({"id": pa.array([3, 4, 5]), "c": column}), "n.t", mode="append")
    with pytest.raises(DalError) as info:
        dal.open("n.t").to_torch(batch_size=2)  # made, not iterated: the footers show the null
    assert "column 'c'" in str(info.value) and "holds nulls" in str(info.value) and "IS NOT NULL" in str(info.value)
    data = dal.open("n.t").filter("c IS NOT NULL").to_torch(batch_size=2)
    rows = list(torch.utils.data.DataLoader(data, batch_size=None, num_workers=workers) if workers else data)
    assert sum(len(b["id"]) for b in rows) == 5
    assert len({b["c"].dtype for b in rows}) == 1  # one dtype in every batch


def test_float_nulls_are_nan_and_string_nulls_none(sqlite_env: Catalog) -> None:
    dal.write(pa.table({"x": pa.array([1.5, None], pa.float64()), "s": pa.array(["a", None])}), "n.f")
    (batch,) = list(dal.open("n.f").to_torch(batch_size=2))
    assert batch["x"].dtype == torch.float64 and np.isnan(batch["x"][1].item()) and batch["x"][0].item() == 1.5
    assert list(batch["s"]) == ["a", None]
