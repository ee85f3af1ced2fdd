"""Input data for writes: Arrow tables, record batches and readers, pandas DataFrames (Spark is in adapters)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal.errors import DalError

if TYPE_CHECKING:
    from dal.expr import Expr


def is_spark_dataframe(data: object) -> bool:
    """True for a pyspark (classic or Connect) DataFrame, checked without importing pyspark."""
    return any(c.__module__.startswith("pyspark.") and c.__name__ == "DataFrame" for c in type(data).__mro__)


def to_reader(data: Any) -> pa.RecordBatchReader:
    """Stream any supported local input as Arrow record batches.

    Raises:
        DalError: the input type is not supported.
    """
    if isinstance(data, pa.RecordBatchReader):
        return data
    if isinstance(data, pa.Table):
        return data.to_reader()
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatchReader.from_batches(data.schema, [data])
    if type(data).__module__.startswith("pandas.") and type(data).__name__ == "DataFrame":
        return pa.Table.from_pandas(data, preserve_index=False).to_reader()
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
