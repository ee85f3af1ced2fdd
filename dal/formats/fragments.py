"""A pyarrow dataset over an explicit file list, with partition values restored from the catalog/log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from dal import io
from dal.formats.base import DataFile


def partition_expression(values: Sequence[tuple[str, str | None]], schema: pa.Schema) -> pc.Expression:
    """``col == value`` for each partition column (typed by ``schema``), ``is_null`` for null values."""
    expr: pc.Expression = pc.scalar(True)
    for name, value in values:
        if value is None:
            term = pc.field(name).is_null()
        else:
            typ = schema.field(name).type
            term = pc.field(name) == pa.scalar(value).cast(typ)
        expr = expr & term
    return expr


def dataset_from_files(
    files: Sequence[DataFile], schema: pa.Schema, location: str, storage_options: Mapping[str, str]
) -> pads.FileSystemDataset:
    """One fragment per file; columns missing from a file (partition columns) come from its expression."""
    fs, _ = io.filesystem(location, storage_options)
    fmt = pads.ParquetFileFormat()
    fragments = [
        fmt.make_fragment(
            io.filesystem(f.uri, storage_options)[1],
            filesystem=fs,
            partition_expression=partition_expression(f.partition_values, schema),
            # sizes from the log/manifest spare a HEAD request per file on object stores
            file_size=f.size_bytes or None,
        )
        for f in files
    ]
    return pads.FileSystemDataset(fragments, schema, fmt, fs)
