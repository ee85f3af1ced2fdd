"""Input data for writes: Arrow tables, record batches and readers, pandas DataFrames (Spark is in adapters).

A pandas column whose cells are NumPy arrays of one N-D shape (N >= 2: images, spectrograms) becomes a
fixed-shape tensor column (nested Arrow fixed-size lists, which a Delta write stores as binary cells of the
arrays' bytes: ``dal.formats.logical``); pyarrow alone refuses it. Arrays of varying shapes, complex numbers and
Python objects Arrow has no type for are refused with one line naming the column and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.errors import DalError, one_line

if TYPE_CHECKING:
    from dal.expr import Expr


def is_spark_dataframe(data: object) -> bool:
    """True for a pyspark (classic or Connect) DataFrame, checked without importing pyspark."""
    return any(c.__module__.startswith("pyspark.") and c.__name__ == "DataFrame" for c in type(data).__mro__)


def to_reader(data: Any) -> pa.RecordBatchReader:
    """Stream any supported local input as Arrow record batches.

    Raises:
        DalError: the input type is not supported, or a pandas column cannot be stored (``from_pandas``).
    """
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if type(data).__module__.partition(".")[0] == "pandas" and type(data).__name__ == "DataFrame":
        return from_pandas(data).to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data)
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        batches = list(data)
        if batches and all(isinstance(b, pa.RecordBatch) for b in batches):
            return pa.RecordBatchReader.from_batches(batches[0].schema, batches)
    raise DalError(
        f"cannot write {type(data).__name__}: pass a Spark or pandas DataFrame, a pyarrow Table, "
        "RecordBatch or RecordBatchReader"
    )


def from_pandas(frame: Any) -> pa.Table:
    """A pandas DataFrame as an Arrow table (its index left out); a column of equal-shape N-D NumPy arrays as a
    fixed-shape tensor column.

    Raises:
        DalError: a column holds complex numbers, N-D arrays of different shapes or of a non-numeric dtype, or
            values Arrow has no type for (one line: the column and what to do).
    """
    tensors: dict[str, pa.Array] = {}
    for name in frame.columns:
        column = frame[name]
        kind = getattr(column.dtype, "kind", "")
        if kind == "c":
            raise DalError(f"column {name!r} holds complex numbers ({column.dtype}), which Arrow cannot store: "
                           f"write the real and imaginary parts as two float columns ({name}.real, {name}.imag)")  # fmt: skip
        if kind == "O":
            tensor = _tensor_column(str(name), column.to_numpy())
            if tensor is not None:
                tensors[name] = tensor
    rest = frame.drop(columns=list(tensors)) if tensors else frame
    try:
        table = pa.Table.from_pandas(rest, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise DalError(_conversion_failed(e)) from e
    if not tensors:
        return table
    order = [str(c) for c in frame.columns]
    columns = {**dict(zip(table.column_names, table.columns, strict=True)), **tensors}
    return pa.table({c: columns[c] for c in order})


def _tensor_column(name: str, cells: np.ndarray) -> pa.Array | None:
    """The object column ``cells`` as a fixed-shape tensor array when its first array cell is N-D (N >= 2);
    None when it holds no such array (pyarrow converts the column, or says why not)."""
    first = next((c for c in cells if isinstance(c, np.ndarray)), None)
    if first is None or first.ndim < 2:
        return None  # scalars, strings, 1-D arrays (a list column): pyarrow's own conversion
    if first.dtype.kind not in "iuf" or first.dtype.itemsize > 8:
        raise DalError(f"column {name!r} holds {first.ndim}-D arrays of {first.dtype}, which dal stores only as "
                       "integers or floats: convert them (e.g. .astype('float32')) or serialize each to bytes")  # fmt: skip
    valid = np.array([not _is_null(c) for c in cells], dtype=bool)
    for row in np.flatnonzero(valid):
        cell = cells[row]
        if not isinstance(cell, np.ndarray) or cell.shape != first.shape or cell.dtype != first.dtype:
            what = f"{cell.dtype} {cell.shape}" if isinstance(cell, np.ndarray) else type(cell).__name__
            raise DalError(f"column {name!r} holds arrays of one shape and dtype ({first.dtype} {first.shape}) and "
                           f"a {what} in row {row}: a tensor column needs one shape (resize or pad the arrays), or "
                           "flatten each to 1-D (a list column)")  # fmt: skip
    values = np.zeros((len(cells), *first.shape), dtype=first.dtype)
    if valid.any():
        values[valid] = np.stack([cells[i] for i in np.flatnonzero(valid)])
    out: pa.Array = pa.array(values.reshape(-1))
    for size in reversed(first.shape):
        out = pa.FixedSizeListArray.from_arrays(out, size)
    if not valid.all():
        out = pa.FixedSizeListArray.from_arrays(out.values, type=out.type, mask=pa.array(~valid))
    return out


def _is_null(cell: object) -> bool:
    """None, NaN, pandas' NA or NaT: a missing cell (a null tensor)."""
    return cell is None or (isinstance(cell, float) and cell != cell) or type(cell).__name__ in ("NAType", "NaTType")


def _conversion_failed(e: Exception) -> str:
    """pyarrow's ``('reason', 'Conversion failed for column x with type object')`` as one line that names the
    column and what Arrow can store."""
    parts = e.args if len(e.args) == 2 and all(isinstance(a, str) for a in e.args) else (str(e),)
    where = parts[-1].replace("Conversion failed for ", "") if len(parts) == 2 else "a column"
    return (f"cannot store {where}: {one_line(parts[0])}; give it numbers, strings, bytes, timestamps, "
            "lists or dicts of those, or N-D NumPy arrays of one shape")  # fmt: skip


def check_rows(rows: pa.Table | pa.RecordBatch, where: Expr) -> None:
    """Refuse rows ``where`` does not match (false or NULL): a partial overwrite (``dal.write(where=)``) writes
    only rows it replaces, as Delta's ``replaceWhere`` checks.

    Raises:
        DalError: naming how many rows; nothing was written.
    """
    from dal.expr import to_arrow, to_sql

    if rows.num_rows == 0:
        return
    table = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    bad = table.num_rows - table.filter(to_arrow(where, table.schema)).num_rows
    if bad:
        raise DalError(
            f"where {to_sql(where)}: {bad} of the {table.num_rows} rows written do not match it; a write with "
            "where= replaces the rows it matches with rows that match it too (nothing was written)"
        )


def checked_batches(batches: Iterable[pa.RecordBatch], where: Expr) -> Iterator[pa.RecordBatch]:
    """``batches``, each refused (``check_rows``) when a row does not match ``where``: a stream's rows are checked
    as they are written, before the commit."""
    for b in batches:
        check_rows(b, where)
        yield b


def partitions_of(table: pa.Table, parts: Sequence[str]) -> Expr:
    """The partitions ``table``'s rows fall in, as a predicate: ``(p = v AND q = w) OR …`` (``IS NULL`` for a
    null value); a table without rows replaces nothing (a predicate no row matches).

    Raises:
        SchemaMismatch: the data lacks a partition column.
    """
    from dal import expr as E
    from dal.errors import SchemaMismatch

    missing = [p for p in parts if p not in table.column_names]
    if missing:
        raise SchemaMismatch(f"overwrite='partitions': the data has no partition column {', '.join(missing)}")
    seen = table.select(list(parts)).group_by(list(parts)).aggregate([]).to_pylist()
    terms: list[Expr] = []
    for row in seen:
        term: Expr | None = None
        for p in parts:
            one: Expr = E.IsNull(E.Col(p)) if row[p] is None else E.Compare("==", E.Col(p), E.Lit(row[p]))
            term = one if term is None else E.And(term, one)
        assert term is not None
        terms.append(term)
    if not terms:  # no rows: no partition is replaced (false on every row, NULL or not)
        return E.And(E.IsNull(E.Col(parts[0])), E.Not(E.IsNull(E.Col(parts[0]))))
    out = terms[0]
    for t in terms[1:]:
        out = E.Or(out, t)
    return out
