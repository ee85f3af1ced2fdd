"""Row positions given to random access (issue 32): integers of any width, checked before any cast, as a Python
list checks them (``IndexError`` out of range: a uint64 past 2**63-1 once wrapped to a negative position and
returned a row from the end); what is not an integer (bool, float, timedelta64, datetime64, other objects) is
refused instead of being read as positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import dal
from dal.catalog import Catalog

torch = pytest.importorskip("torch")

N = 50


@pytest.fixture
def whole(sqlite_env: Catalog) -> pa.Table:
    table = pa.table({"id": np.arange(N, dtype=np.int64), "name": [f"r{i}" for i in range(N)]})
    dal.write(table, "pos")
    return table


def _entry_points() -> list[Any]:
    """Every way to take rows by position: Scan.take, RowIndex.take, the torch map dataset (item and batch)."""
    scan = dal.open("pos").scan()
    index = scan.rows()
    ds = scan.to_torch_map()
    return [scan.take, index.take, ds.batch, ds.__getitem__, ds.__getitems__]


BEYOND = [
    np.array([2**63], dtype=np.uint64),
    np.array([2**64 - 1], dtype=np.uint64),
    np.array([3, 2**63 + 5], dtype=np.uint64),
    [2**63],  # NumPy makes it a uint64 array
    [2**64],  # an object array
    [-(2**63) - 1],
    [1, 2**70],
]


@pytest.mark.parametrize("positions", BEYOND, ids=repr)
def test_positions_past_int64_are_out_of_range(whole: pa.Table, positions: Any) -> None:
    rows = list(range(N))
    with pytest.raises(IndexError):  # the reference: a Python list of the same rows
        [rows[int(p)] for p in np.asarray(positions, dtype=object).reshape(-1)]
    for take in _entry_points():
        with pytest.raises(IndexError):
            take(positions)


@pytest.mark.parametrize("scalar", [np.uint64(2**63), np.uint64(2**64 - 1), 2**63, 2**64, -(2**63) - 1])
def test_one_position_past_int64_is_out_of_range(whole: pa.Table, scalar: Any) -> None:
    ds = dal.open("pos").scan().to_torch_map()
    with pytest.raises(IndexError):
        list(range(N))[int(scalar)]
    with pytest.raises(IndexError):
        ds[scalar]


NOT_INTEGERS = [
    np.array([1, 2], dtype="timedelta64[s]"),
    np.array([1], dtype="timedelta64[ns]"),
    np.array(["2024-01-01"], dtype="datetime64[D]"),
    np.array([1.0, 2.0]),
    [1.0],
    np.array([True, False]),  # NumPy: a mask; a list: rows 1 and 0; neither is a position here
    [True],
    np.array([1, 2.5], dtype=object),
    np.array([True], dtype=object),
    ["3"],
    [None],
]


@pytest.mark.parametrize("positions", NOT_INTEGERS, ids=repr)
def test_positions_that_are_not_integers_are_refused(whole: pa.Table, positions: Any) -> None:
    for take in _entry_points():
        with pytest.raises(TypeError, match="integers"):
            take(positions)


@pytest.mark.parametrize("scalar", [True, np.bool_(True), np.timedelta64(3, "s"), np.datetime64(3, "s"), 1.0])
def test_one_position_that_is_not_an_integer_is_refused(whole: pa.Table, scalar: Any) -> None:
    ds = dal.open("pos").scan().to_torch_map()
    with pytest.raises(TypeError, match="integers"):
        ds[scalar]


def test_integers_of_every_width_take_the_rows_numpy_takes(whole: pa.Table) -> None:
    picks = [0, N - 1, 7, 7, 3]
    want = whole.take(pa.array(picks))  # reference: pyarrow's take of the written table
    scan = dal.open("pos").scan()
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64, object):
        assert scan.take(np.array(picks, dtype=dtype)).equals(want), dtype
    assert scan.take([2**0, -1, -N]).equals(whole.take(pa.array([1, N - 1, 0])))
    assert scan.take(np.array([], dtype="timedelta64[s]")).num_rows == 0  # nothing to refuse in no positions
    ds = scan.to_torch_map()
    assert int(ds[np.uint64(N - 1)]["id"]) == N - 1 and int(ds[np.int8(-1)]["id"]) == N - 1
    assert ds.batch(np.array(picks, dtype=np.uint64))["id"].tolist() == picks
