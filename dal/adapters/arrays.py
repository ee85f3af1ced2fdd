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
from dal.tensors.schema import fixed_shape as fixed_shape
from dal.tensors.schema import has_nulls, stack_fixed

if TYPE_CHECKING:
    from dal.read.source import Source

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
    """Whether ``typ`` is a list of integers or floats (one level), or a fixed-shape tensor (``fixed_shape``)."""
    if fixed_shape(typ) is not None:
        return True
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        return False
    value = typ.value_type
    return bool(pa.types.is_integer(value) or pa.types.is_floating(value))


def matrix(column: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """The column as a (rows, n) array when every row is a non-null array of ``n`` non-null numbers (a
    fixed-shape tensor column: (rows, *shape)); None otherwise (varying lengths, a null array or a null value)."""
    array = column
    if isinstance(column, pa.ChunkedArray):  # one chunk as it is: combine_chunks copies even a single chunk
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if array.null_count:
        return None
    shape = fixed_shape(array.type)
    if shape is not None:  # (rows, *shape): the chunk's one values buffer, viewed, not copied
        return None if has_nulls(array, shape) else stack_fixed(array, shape)
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


def widths(scan: Source, names: list[str]) -> dict[str, int | None]:
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


def check_footers(scan: Source, widths: dict[str, int | None]) -> None:
    """Before reading: a DalError naming the column when a row group's footer shows that its arrays are
    not all of the length found in the first row group (Parquet counts one value per array element, and
    one per empty or null array), so a mismatch is caught at spec time, not mid-epoch."""
    # a FixedSizeList column holds arrays of its size by its type (a Delta tensor is stored as one binary per row)
    schema = scan.arrow_schema
    fixed_widths = {n: w for n, w in widths.items() if w and not pa.types.is_fixed_size_list(schema.field(n).type)}
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


def check_nulls(scan: Source, tensors: dict[str, str]) -> None:
    """Before the first batch: a DalError naming the first column of ``tensors`` (column -> the tensor it
    becomes, e.g. "TensorFlow") that holds a null in the rows of ``scan`` (a read source: a scan's or a mix's; every rank's
    rows, so that all ranks refuse alike), which that tensor has no value for.

    Footer statistics decide where they can: a row group whose null count is 0 is clean; one with nulls
    and nothing that could drop them (no filter or window, no deleted rows) is proof; a filter or window that
    rejects nulls of the column (a comparison, ``IS NOT NULL``, ``IN``, ``LIKE``) rules them out. Otherwise
    (statistics missing; nulls a filter or deletion vector may remove) that column of those row groups is
    read, filtered, and counted."""
    from dal.read import reader
    from dal.read.plan import Query

    for member in scan.members():
        wanted = [n for n in tensors if n not in _null_rejected(member.condition)]
        if not wanted:
            continue
        held = member.materialized()  # rows in memory (a change read): counted there
        if held is not None:
            for name in wanted:
                if held.column(name).null_count:
                    raise nulls_error(member.dataset.name, name, tensors[name])
            continue
        query = member.query
        schema = query.schema
        physical = query.physical
        stored = {f.name: p.name for f, p in zip(schema, physical, strict=True)} if physical is not None else {}
        parts = set(member.dataset.version.partition_columns)
        conditioned = member.condition is not None
        footers: dict[str, tuple[Any, dict[str, int]]] = {}  # file -> (footer, column path -> index)
        suspects: dict[str, list[Any]] = {n: [] for n in wanted}
        for task in query.all_tasks():  # the whole scan, unsharded, before sampling
            for name in wanted:
                if name in parts:
                    nulls: int | None = task.num_rows if dict(task.partition_values).get(name) is None else 0
                else:
                    nulls = _footer_nulls(query, task, stored.get(name, name), footers)
                if nulls == 0:
                    continue
                if nulls is not None and not conditioned and not task.deleted:
                    raise nulls_error(member.dataset.name, name, tensors[name])
                suspects[name].append(task)
        for name, tasks in suspects.items():
            narrow = Query(member.dataset, (name,), member.filters, member.window)  # every row of the column
            for task in tasks:
                if reader.read_task(narrow, task).column(name).null_count:
                    raise nulls_error(member.dataset.name, name, tensors[name])


def _footer_nulls(query: Any, task: Any, column: str, footers: dict[str, tuple[Any, dict[str, int]]]) -> int | None:
    """Nulls of ``column`` (its name in the file) in ``task``'s row group by the footer's statistics (None: not
    recorded); ``footers`` caches each file's footer and column index."""
    if task.uri not in footers:
        footer = query.fragment(task).metadata
        first = footer.row_group(0)
        footers[task.uri] = (footer, {first.column(c).path_in_schema: c for c in range(first.num_columns)})
    footer, index = footers[task.uri]
    at = index.get(column)
    stats = footer.row_group(task.row_group).column(at).statistics if at is not None else None
    return stats.null_count if stats is not None and stats.has_null_count else None  # type: ignore[no-any-return]


def _null_rejected(condition: Any) -> set[str]:
    """Columns whose nulls ``condition`` (a bound filter) never keeps: those named by one of its AND-terms
    that is null wherever they are (comparisons, IN, LIKE, IS NOT NULL, a type-decided comparison)."""
    from dal import expr as E
    from dal.expr.walk import conjuncts

    out: set[str] = set()
    for t in conjuncts(condition):
        if isinstance(t, E.Compare | E.IsIn | E.Like | E.Fixed):
            out |= t.columns()
        elif isinstance(t, E.Not) and isinstance(t.operand, E.IsNull):
            out |= t.operand.columns()
    return out
