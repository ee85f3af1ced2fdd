"""A pyarrow dataset over an explicit file list, with partition values restored from the catalog/log.

``read_exact`` reads one row group the way a table format means it when plain Parquet reading is not
enough: Delta deletion vectors (rows removed by position) and column mapping (Parquet columns named by
physical names, matched to the logical schema, nested fields included).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from dal.formats import arrays
from dal.formats.base import DataFile
from dal.storage import uris

if TYPE_CHECKING:  # imported where used: pyarrow.dataset imports pandas (~0.25 s CPU of a first open)
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq


def parquet_format() -> pads.ParquetFileFormat:
    """Parquet as dal reads it: INT96 timestamps (Spark's legacy encoding) decoded as microseconds, so
    values outside the nanosecond range (year 1677 .. 2262, e.g. 9999-12-31) stay exact."""
    import pyarrow.dataset as pads

    return pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(coerce_int96_timestamp_unit="us"))


def partition_value(value: str | None, typ: pa.DataType) -> pa.Scalar:
    """A partition value (as the log/manifest spells it) typed as its column."""
    # from arrays, not pa.scalar: a Python value converted to Arrow imports pandas (0.3 s of a first read)
    if value is None:
        return pa.nulls(1, typ)[0]
    return arrays.strings([value]).cast(typ)[0]


def partition_expression(values: Sequence[tuple[str, str | None]], schema: pa.Schema) -> pc.Expression:
    """``col == value`` for each partition column (typed by ``schema``), ``is_null`` for null values."""
    expr: pc.Expression = pc.scalar(True)
    for name, value in values:
        if value is None:
            term = pc.field(name).is_null()
        else:
            term = pc.field(name) == partition_value(value, schema.field(name).type)
        expr = expr & term
    return expr


def dataset_from_files(
    files: Sequence[DataFile],
    schema: pa.Schema,
    location: str,
    storage_options: Mapping[str, str],
    path_of: Callable[[str], str] | None = None,
) -> pads.FileSystemDataset:
    """One fragment per file; columns missing from a file (partition columns) come from its expression.
    ``path_of``: a file's path in the location's filesystem (default: resolved from its URI, file by file)."""
    import pyarrow.dataset as pads

    fs, _ = uris.filesystem(location, storage_options)
    fmt = parquet_format()
    path = path_of or (lambda uri: uris.filesystem(uri, storage_options)[1])
    fragments = [
        fmt.make_fragment(
            path(f.uri),
            filesystem=fs,
            partition_expression=partition_expression(f.partition_values, schema),
            # sizes from the log/manifest spare a HEAD request per file on object stores
            file_size=f.size_bytes or None,
        )
        for f in files
    ]
    return pads.FileSystemDataset(fragments, schema, fmt, fs)


def footer(path: str, filesystem: pafs.FileSystem) -> pq.FileMetaData:
    """A Parquet file's footer (without ``pyarrow.dataset``)."""
    import pyarrow.parquet as pq

    return pq.ParquetFile(path, filesystem=filesystem).metadata


def row_group_starts(path: str, filesystem: pafs.FileSystem) -> list[int]:
    """The position in the file of each row group's first row."""
    md = footer(path, filesystem)
    starts, at = [], 0
    for i in range(md.num_row_groups):
        starts.append(at)
        at += md.row_group(i).num_rows
    return starts


def read_exact(
    path: str,
    filesystem: pafs.FileSystem,
    row_group: int,
    schema: pa.Schema,
    physical: pa.Schema | None,
    partition_values: Sequence[tuple[str, str | None]],
    deleted: Sequence[int] = (),
    *,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The columns of ``schema`` (only ``columns`` when given, in schema order) for one row group, deleted
    positions dropped, before any row filter.

    ``physical`` (column mapping) names each field of ``schema`` as the Parquet file does; the result
    carries the logical names. Columns absent from the file are null; partition columns come from
    ``partition_values``.
    """
    import pyarrow.parquet as pq

    parts = dict(partition_values)
    physical = physical or schema
    keep = set(schema.names if columns is None else columns)
    fields = [(f, p) for f, p in zip(schema, physical, strict=True) if f.name in keep]
    with filesystem.open_input_file(path) as fh:
        pf = pq.ParquetFile(fh, coerce_int96_timestamp_unit="us")
        present = set(pf.schema_arrow.names)
        fields = [(f, _by_field_id(p, pf.schema_arrow, present)) for f, p in fields]
        wanted = [p.name for f, p in fields if f.name not in parts and p.name in present]
        data = pf.read_row_group(row_group, columns=wanted)
        n = pf.metadata.row_group(row_group).num_rows
    out = []
    for f, p in fields:
        if f.name in parts:
            out.append(pa.repeat(partition_value(parts[f.name], f.type), n))
        elif p.name in present:
            # cast by physical names (types as the table says), then relabel with the logical names
            col = data.column(p.name).cast(p.type)
            out.append(pa.chunked_array([c.view(f.type) for c in col.chunks], type=f.type))
        else:
            out.append(pa.nulls(n, f.type))
    table = pa.Table.from_arrays(out, schema=pa.schema([f for f, _ in fields])) if fields else _no_columns(n)
    if deleted:
        mask = np.ones(n, dtype=bool)
        mask[np.asarray(deleted, dtype=np.int64)] = False
        table = table.filter(arrays.mask(mask))
    return table


def _by_field_id(physical: pa.Field, file_schema: pa.Schema, present: set[str]) -> pa.Field:
    """Column mapping's id mode matches columns by Parquet field id: when the file has no column of the
    physical name, the column carrying the field's ``delta.columnMapping.id`` (top-level fields)."""
    if physical.name in present or not physical.metadata:
        return physical
    wanted = physical.metadata.get(b"delta.columnMapping.id")
    if wanted is None:
        return physical
    for f in file_schema:
        if f.metadata and f.metadata.get(b"PARQUET:field_id") == wanted:
            return physical.with_name(f.name)
    return physical


def _no_columns(rows: int) -> pa.Table:
    """A table of ``rows`` rows and no columns (what a count reads)."""
    return pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])
