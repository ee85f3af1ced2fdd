"""Numeric array columns (Arrow list / large_list / fixed_size_list of integers or floats) as tensors.

Arrays of one length in the data (what ``dal.convert`` and Spark make of MLlib vectors; Delta stores a
FixedSizeList as a plain list, so the length is found in the data) become one (rows, n) NumPy array, and
so one (batch, n) tensor; arrays of varying length stay one array per row (lists / ragged tensors).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.errors import DalError

if TYPE_CHECKING:
    from dal.scan import Scan

PEEK_TASKS = 8  # row groups read at most to find the length of a column's arrays


def no_null_value(typ: pa.DataType) -> bool:
    """Whether a column of ``typ`` converts to a tensor with no value for a null: integers, bools, timestamps
    and dates (floats have NaN; torch keeps strings as lists, which hold None — TensorFlow does not)."""
    return bool(
        pa.types.is_integer(typ) or pa.types.is_boolean(typ) or pa.types.is_timestamp(typ) or pa.types.is_date(typ)
    )


def nulls_error(dataset: str, name: str, tensor: str) -> DalError:
    """The error for a null in column ``name`` that a ``tensor`` (e.g. "TensorFlow") cannot hold."""
    return DalError(
        f"column {name!r} of {dataset} holds nulls, which a {tensor} tensor cannot: filter them out "
        f'(.filter("{name} IS NOT NULL")) or replace them in a dal.TransformSpec'
    )


def numeric_list(typ: pa.DataType) -> bool:
    """Whether ``typ`` is a list of integers or floats (one level)."""
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        return False
    value = typ.value_type
    return bool(pa.types.is_integer(value) or pa.types.is_floating(value))


def matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """The column as a (rows, n) array when every row is a non-null array of ``n`` non-null numbers;
    None otherwise (varying lengths, a null array or a null value)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count:
        return None
    values = array.flatten()
    if values.null_count:
        return None
    rows = len(array)
    if pa.types.is_fixed_size_list(array.type):
        n = array.type.list_size
    else:
        lengths = pc.list_value_length(array).to_numpy()
        if rows and lengths.min() != lengths.max():
            return None
        n = int(lengths[0]) if rows else 0
    out: np.ndarray = values.to_numpy(zero_copy_only=False).reshape(rows, n)
    return out


def rows(column: pa.Array | pa.ChunkedArray) -> list[np.ndarray | None]:
    """One NumPy array per row (None for a null array)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return [None if v is None else np.asarray(v) for v in array.to_numpy(zero_copy_only=False)]


def widths(scan: Scan, names: list[str]) -> dict[str, int | None]:
    """For each numeric array column of ``names``: the length of its arrays, when its first non-empty row
    group of the scan holds arrays of one length (FixedSizeList columns: their size); None when they vary.
    Reads only those columns of at most ``PEEK_TASKS`` row groups (nothing when the types decide)."""
    from dal.read import reader
    from dal.read.plan import Query

    out: dict[str, int | None] = {}
    unknown = []
    for name in names:
        typ = scan.arrow_schema.field(name).type
        if pa.types.is_fixed_size_list(typ):
            out[name] = typ.list_size
        else:
            unknown.append(name)
    if not unknown:
        return out
    query = Query(scan.dataset, tuple(unknown), (), None)  # whole row groups: lengths as stored
    for task in scan.plan()[:PEEK_TASKS]:
        table = reader.read_task(query, dataclasses.replace(task, offset=0, length=None))
        if table.num_rows:
            for name in unknown:
                m = matrix(table.column(name))
                out[name] = None if m is None else m.shape[1]
            return out
    return out | dict.fromkeys(unknown)


def fixed(name: str, dataset: str, column: pa.Array | pa.ChunkedArray, width: int) -> np.ndarray:
    """The column as (rows, width), or a DalError naming it when its arrays are not all ``width`` long."""
    m = matrix(column)
    if m is None or m.shape[1] != width:
        raise DalError(
            f"column {name!r} of {dataset}: its first row group holds arrays of {width} values, so its "
            f"TensorFlow spec is (None, {width}), but a later chunk holds arrays of other lengths or null "
            f"arrays; its arrays vary in length: make them one length, or select the column out"
        )
    return m


def check_footers(scan: Scan, widths: dict[str, int | None]) -> None:
    """Before reading: a DalError naming the column when a row group's footer shows that its arrays are
    not all of the length found in the first row group (Parquet counts one value per array element, and
    one per empty or null array), so a mismatch is caught at spec time, not mid-epoch."""
    fixed_widths = {n: w for n, w in widths.items() if w}
    if not fixed_widths:
        return
    footers: dict[str, Any] = {}
    for task in scan.plan():
        if task.uri not in footers:
            footers[task.uri] = scan.query.fragment(task).metadata
        rg = footers[task.uri].row_group(task.row_group)
        for c in range(rg.num_columns):
            chunk = rg.column(c)
            name = chunk.path_in_schema.split(".")[0]
            width = fixed_widths.get(name)
            if width is not None and chunk.num_values != width * rg.num_rows:
                raise DalError(
                    f"column {name!r} of {scan.dataset.name}: its first row group holds arrays of {width} values, "
                    f"so its TensorFlow spec would be (None, {width}), but row group {task.row_group} of {task.uri} "
                    f"holds arrays of other lengths or null arrays; make them one length, or select the column out"
                )
