"""A partial overwrite of files staged on Spark's executors (``dal.write(spark_df, where=)`` /
``overwrite='partitions'``), committed as ONE Delta version through delta-rs: the staged files added, and the
files of the version read that hold rows the predicate matches removed — those that also hold rows it does not
match (false or NULL) rewritten with just those rows first, as delta-rs's predicate overwrite
(``write_deltalake(predicate=)``, the path local data takes) rewrites them.

Which files may hold a matching row is decided from their partition values and statistics
(``dal.expr.stats.may_match``, as reads prune); only those are opened, on the driver. A table with column mapping
is refused (its files name physical columns, which staged files do not).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dal.errors import DalError
from dal.expr import Expr, to_arrow
from dal.expr.stats import may_match
from dal.formats.delta.log import _arrow_schema, _deleted_rows, add_actions
from dal.formats.delta.staging import write_files
from dal.formats.delta.stats import prunable_bounds
from dal.formats.delta.types import COLUMN_MAPPING_KEY
from dal.formats.index import FileIndex
from dal.storage import ownership, uris
from dal.storage.partitions import partition_string


def replaced_files(
    location: str,
    table: Any,
    where: Expr,
    storage_options: Mapping[str, str],
    *,
    prefix: str,
    compression: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The files of ``table`` (delta-rs, opened at the version read) that ``where`` replaces rows of: their
    remove records (``path``, ``size``, ``partition_values``), and the records of the files written (named
    ``prefix``…) with their rows ``where`` does not match, to be added in the same commit.

    Raises:
        DalError: a table with column mapping.
    """
    schema = _arrow_schema(table)
    if any(f.metadata and COLUMN_MAPPING_KEY.encode() in f.metadata for f in schema):
        raise DalError(
            f"{location}: the Delta table maps its columns to physical names; replacing part of it from a Spark "
            "DataFrame is not supported (write the rows from pandas or Arrow, which delta-rs writes)"
        )
    index = _index(location, table, schema)
    if not len(index):
        return [], []
    candidates = may_match(where, schema, lambda c: index.bounds(c, schema), len(index)).nonzero()[0]
    parts = index.partition_columns
    fs, root = uris.filesystem(location, storage_options)
    removes: list[dict[str, Any]] = []
    kept: list[pa.Table] = []
    for i in candidates:
        row = index.files.slice(int(i), 1).to_pylist()[0]
        rel = str(row["path"])
        values = {c: row.get(f"partition.{c}") for c in parts}
        rows = _rows(fs, uris.join(root, *rel.split("/")), schema, values, index.deleted.get(rel, ()))
        matches = to_arrow(where, rows.schema)
        rest = rows.filter(~matches | matches.is_null())  # false or NULL: kept, as delta-rs keeps them
        if rest.num_rows == rows.num_rows:
            continue  # no row of it matches: the file stays
        removes.append(
            {"path": rel, "size": int(row["size_bytes"]),
             "partition_values": {c: partition_string(v) for c, v in values.items()}}
        )  # fmt: skip
        if rest.num_rows:
            kept.append(rest)
    if not kept:
        return removes, []
    batches = (b for t in kept for b in t.to_batches())
    records = write_files(batches, location, parts, dict(storage_options), prefix=prefix, compression=compression)
    return removes, records


def _index(location: str, table: Any, schema: pa.Schema) -> FileIndex:
    """The add actions of ``table`` as the reads' ``FileIndex`` (paths confined below the table, partition
    values typed, statistics made safe for pruning, deletion vectors)."""
    parts = tuple(table.metadata().partition_columns)
    actions = add_actions(table)
    where = f"the Delta table {location} (version {table.version()})"
    paths = ownership.below_all(location, actions.column("path"), table=where, entry="an add action's path")
    actions = actions.set_column(actions.column_names.index("path"), "path", paths)
    deleted: dict[str, tuple[int, ...]] = {}
    if "deletionVectors" in (table.protocol().reader_features or []):
        deleted = _deleted_rows(table)
    return FileIndex(location, prunable_bounds(actions, schema, parts, with_stats=True), parts, deleted)


def _rows(fs: Any, path: str, schema: pa.Schema, values: Mapping[str, Any], deleted: Sequence[int]) -> pa.Table:
    """One data file's rows in ``schema``'s columns and order: its partition values as columns, a column it
    lacks (added later) as NULLs, the rows its deletion vector removes left out."""
    data = pq.read_table(path, filesystem=fs)
    if deleted:
        keep = np.ones(data.num_rows, dtype=bool)
        keep[np.asarray(deleted, dtype=np.int64)] = False
        data = data.filter(pa.array(keep))
    columns = []
    for f in schema:
        if f.name in values:
            columns.append(pa.array([values[f.name]] * data.num_rows).cast(f.type))
        elif f.name in data.column_names:
            columns.append(data.column(f.name))
        else:
            columns.append(pa.nulls(data.num_rows, f.type))
    return pa.table(columns, names=schema.names)
