"""Writes that change part of a dataset: replace the rows a predicate matches (``dal.write(where=)``), replace the
partitions the data holds (``dal.write(overwrite="partitions")``), delete rows (``dal.delete``).

Each is one catalog version made by one storage commit on the version it read (``WriteOptions.where``: the
predicate bound against that version's schema; Delta commits it only while that version is still the newest,
else ``WriteConflict``), through the same refusals, intent, claim and recording as every write
(``dal.writes.refusals``, ``dal.writes.commit``). The predicate is parsed by ``dal.expr`` (the text of every
filter: an unknown column is the same ``FilterError``) and handed to the format as a bound tree, never as the
caller's text (Delta: ``dal.formats.delta.predicate``).

- ``where=``: every row written must match the predicate (as Delta's ``replaceWhere`` checks), else the write
  is refused — in-memory data before anything is written, a stream before its commit.
- ``overwrite="partitions"``: the predicate is the partitions present in the data (Spark's
  ``partitionOverwriteMode=dynamic``): ``(p = v AND q = w) OR …``, ``IS NULL`` for a null value; a stream is
  read into memory first (the partitions must be known before the commit). A Spark DataFrame is not: its
  executors report the partitions of the files they staged, and the driver builds the predicate from them
  before the commit (``WriteOptions.partitions``, ``dal.spark.write``).

A Spark DataFrame's rows are checked against ``where=`` on the executors as they are staged (a row that does not
match fails the job: nothing is committed).
- ``dal.delete``: a new version without the matching rows; nothing matched: no new version.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pyarrow as pa

from dal import expr as E
from dal.catalog import VersionInfo
from dal.errors import DalError
from dal.formats.base import Format
from dal.formats.inputs import check_rows, is_spark_dataframe, partitions_of, to_reader

Overwrite = Literal["table", "partitions"]
OVERWRITES = ("table", "partitions")


def check_arguments(mode: str, where: Any, overwrite: Any, schema_mode: Any) -> None:
    """``where=`` and ``overwrite=`` by themselves (before the catalog is opened).

    Raises:
        DalError: another mode, both at once, a schema mode, an ``overwrite`` not in ``OVERWRITES``.
    """
    if overwrite not in OVERWRITES:
        raise DalError(f"overwrite must be 'table' or 'partitions', not {overwrite!r}")
    if where is None and overwrite == "table":
        return
    what = "where=" if where is not None else "overwrite='partitions'"
    if where is not None and overwrite == "partitions":
        raise DalError("pass where= or overwrite='partitions', not both: each says which rows are replaced")
    if where is not None and not isinstance(where, str | E.Expr):
        raise DalError(f"where must be a SQL string or a dal.col(...) expression, not {type(where).__name__}")
    if mode != "overwrite":
        raise DalError(f"{what} replaces rows and needs mode='overwrite'")
    if schema_mode is not None:
        raise DalError(f"{what} replaces rows under the table's schema: schema_mode must be None")


def predicate(
    name: str,
    fmt: Format,
    location: str,
    options: dict[str, str],
    latest: VersionInfo | None,
    where: Any,
    overwrite: str,
    data: Any,
) -> tuple[E.Expr | None, Any]:
    """The rows a partial overwrite replaces, as a tree bound against ``latest``'s schema (None: the whole
    table), and the data to write (a stream read into a table where the partitions must be known first).

    Raises:
        FilterError: an unknown column, a literal of the wrong type. DalError: no version to replace rows of, a
            table without partitions. DalError: a row of in-memory data the predicate does not match.
    """
    if where is None and overwrite == "table":
        return None, data
    if latest is None:
        raise DalError(f"{name} has no version to replace rows of: write it whole first (mode='overwrite')")
    schema = fmt.arrow_schema(location, latest, options)
    if overwrite == "partitions":
        parts = latest.partition_columns
        if not parts:
            raise DalError(f"{name} is not partitioned: overwrite='partitions' has no partitions to replace")
        if is_spark_dataframe(data):  # the executors report the partitions they staged (WriteOptions.partitions)
            return None, data
        if not isinstance(data, pa.Table | pa.RecordBatch | Mapping | list) and not _is_pandas(data):
            data = in_memory(data)  # a stream: its partitions must be known before the commit
        return E.bind(partitions_of(_partition_table(data, parts), parts), schema), data
    bound = E.bind(E.as_expr(where), schema)
    if isinstance(data, pa.Table | pa.RecordBatch) or _is_pandas(data):
        check_rows(in_memory(data), bound)  # refused before anything is written
    return bound, data


def in_memory(data: Any) -> pa.Table:
    """Local ``data`` as one Arrow table (a stream is read whole)."""
    if isinstance(data, pa.Table):
        return data
    return to_reader(data).read_all()


def _is_pandas(data: Any) -> bool:
    return type(data).__module__.partition(".")[0] == "pandas" and type(data).__name__ == "DataFrame"


def _partition_table(data: Any, parts: Sequence[str]) -> pa.Table:
    """The partition columns of local ``data`` (Arrow, pandas, a dict of columns or a list of row dicts, as
    Petastorm writes take) as an Arrow table; columns it lacks are left out (``partitions_of`` refuses)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if _is_pandas(data):
        return pa.Table.from_pandas(data[[p for p in parts if p in data.columns]], preserve_index=False)
    if isinstance(data, Mapping):
        return pa.table({p: list(data[p]) for p in parts if p in data})
    if isinstance(data, list) and all(isinstance(r, Mapping) for r in data):
        return pa.Table.from_pylist([{p: r.get(p) for p in parts} for r in data])
    return in_memory(data)
