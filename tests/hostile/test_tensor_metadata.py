"""A column's ``dal.arrow_type`` / ``dal.tensor`` metadata is anyone's to write (delta-rs and Spark keep it): it is
believed only where the stored column can be what it says (issue 32). A tensor is stored as binary cells; a
widened unsigned column as integers; ``dal.tensor``, when present, names the same dtype and shape. Otherwise
registering the table, or planning a scan of a dataset already registered, is a ``FormatError`` naming the
column, where a string column's bytes were decoded as tensors, text parsed as numbers, and an int64 column's
buffers read as binary offsets mid-read.

The hostile tables are written by delta-rs (and pyarrow, for plain Parquet) with forged field metadata built
here, not by dal's own helpers."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

import dal
from dal.catalog import Catalog
from dal.errors import FormatError

TENSOR = pa.list_(pa.uint8(), 4)


def _claim(t: pa.DataType, tensor: dict[str, Any] | None = None) -> dict[bytes, bytes]:
    """Field metadata saying a column was written as ``t`` (and, for a tensor, its dtype and shape)."""
    meta = {
        b"dal.arrow_type": base64.b64encode(pa.schema([pa.field("t", t)]).serialize().to_pybytes()),
        b"dal.arrow_type.text": str(t).encode(),
    }
    if tensor is not None:
        meta[b"dal.tensor"] = json.dumps(tensor).encode()
    return meta


UINT8X4 = {"dtype": "uint8", "shape": [4], "order": "C", "byteorder": "little"}


def _table(column: pa.Array, meta: dict[bytes, bytes]) -> pa.Table:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", column.type, metadata=meta)])
    return pa.table([pa.array(np.arange(len(column)), pa.int64()), column], schema=schema)


HOSTILE = {
    "string cells as a tensor": (pa.array(["abcd", "efgh"]), _claim(TENSOR, UINT8X4)),
    "int64 as a tensor": (pa.array([1, 2], pa.int64()), _claim(TENSOR, UINT8X4)),
    "bool as a tensor": (pa.array([True, False, True]), _claim(TENSOR)),
    "float64 as a tensor": (pa.array([1.5, 2.5]), _claim(pa.list_(pa.float32(), 2))),
    "dal.tensor disagrees (dtype)": (
        pa.array([b"abcd", b"efgh"]),
        _claim(TENSOR, {**UINT8X4, "dtype": "float32", "shape": [1]}),
    ),
    "dal.tensor disagrees (shape)": (pa.array([b"abcd", b"efgh"]), _claim(TENSOR, {**UINT8X4, "shape": [2, 2]})),
    "dal.tensor is not JSON": (pa.array([b"abcd", b"efgh"]), {**_claim(TENSOR), b"dal.tensor": b"{uint8"}),
    "text as uint8": (pa.array(["12", "7"]), _claim(pa.uint8())),
    "a struct's text as uint8": (
        pa.array([{"a": "12"}, {"a": "7"}]),
        _claim(pa.struct([pa.field("a", pa.uint8())])),
    ),
    "a list of text as uint16": (pa.array([["1", "2"], ["3"]]), _claim(pa.list_(pa.uint16()))),
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=str)
def test_delta_metadata_the_column_cannot_hold_is_refused_at_register(
    sqlite_env: Catalog, tmp_path: Path, case: str
) -> None:
    column, meta = HOSTILE[case]
    write_deltalake(str(tmp_path / "t"), _table(column, meta))
    with pytest.raises(FormatError, match="column 'x'"):
        dal.register("h.t", str(tmp_path / "t"))


@pytest.mark.parametrize("case", list(HOSTILE), ids=str)
def test_parquet_metadata_the_column_cannot_hold_is_refused_when_planned(
    sqlite_env: Catalog, tmp_path: Path, case: str
) -> None:
    column, meta = HOSTILE[case]
    table = _table(column, meta)
    (tmp_path / "p").mkdir()
    pq.write_table(table, tmp_path / "p" / "part-0.parquet")
    dal.register("h.p", str(tmp_path / "p"), format="parquet")  # plain Parquet's schema is recorded as stored
    scan = dal.open("h.p").scan()
    with pytest.raises(FormatError, match="column 'x'"):
        scan.plan()  # before any data is read
    for read in (scan.to_arrow, scan.count, lambda: next(scan.iter_batches(1)), lambda: scan.select("id")):
        with pytest.raises(FormatError, match="column 'x'"):
            read()


def test_metadata_that_fits_the_column_is_still_believed(sqlite_env: Catalog, tmp_path: Path) -> None:
    cells = [bytes([1, 2, 3, 250]), None, bytes([9, 8, 7, 6])]
    tensors = _table(pa.array(cells, pa.binary()), _claim(TENSOR, {**UINT8X4, "written_by": "another tool"}))
    write_deltalake(str(tmp_path / "tensors"), tensors)
    dal.register("ok.tensors", str(tmp_path / "tensors"))
    got = dal.open("ok.tensors").scan().to_arrow().column("x")
    assert got.type == TENSOR  # the reference: NumPy's reading of the cells' bytes
    assert got.to_pylist() == [None if c is None else np.frombuffer(c, np.uint8).tolist() for c in cells]

    widened = _table(pa.array([12, 255, None], pa.int16()), _claim(pa.uint8()))
    write_deltalake(str(tmp_path / "widened"), widened)
    dal.register("ok.widened", str(tmp_path / "widened"))
    got = dal.open("ok.widened").scan().to_arrow().column("x")
    assert got.type == pa.uint8() and got.to_pylist() == [12, 255, None]
