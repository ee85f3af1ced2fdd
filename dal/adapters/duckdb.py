"""DuckDB over a scan: a relation reading the scan's Arrow stream.

The stream is the read source's ``iter_chunks`` (the pinned version's planned files only, Delta deletion vectors and
column mapping honoured, the scan's projection and filters pushed into the Parquet reads); DuckDB applies
its own SQL on top. DuckDB runs a relation again on every call, so the source is an object whose Arrow
stream (``__arrow_c_stream__``) starts a fresh read of the scan each time it is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from dal.errors import FilterError, require

if TYPE_CHECKING:
    import duckdb

    from dal.read.source import Source

__all__ = ["to_duckdb"]


class _Stream:
    """The scan's rows as an Arrow stream, read afresh for every consumer (the Arrow PyCapsule interface)."""

    def __init__(self, scan: Source) -> None:
        self.scan = scan
        schema = scan.arrow_schema
        self.schema = pa.schema([schema.field(n) for n in scan.output_names])

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        batches = (b for chunk in self.scan.iter_chunks() for b in chunk.cast(self.schema).to_batches())
        reader = pa.RecordBatchReader.from_batches(self.schema, batches)
        return reader.__arrow_c_stream__(requested_schema)


def to_duckdb(
    scan: Source, connection: duckdb.DuckDBPyConnection | None = None, name: str | None = None
) -> duckdb.DuckDBPyRelation:
    """A DuckDB relation over ``scan`` on ``connection`` (default: ``duckdb.connect()``, in memory),
    also registered as view ``name`` when given."""
    db = require("duckdb", "duckdb")
    if name is not None and (not isinstance(name, str) or not name.isidentifier()):
        raise FilterError(f"a DuckDB view name must be an identifier, not {name!r}")
    con = connection if connection is not None else db.connect()
    relation: duckdb.DuckDBPyRelation = con.from_arrow(_Stream(scan))
    if name is not None:
        relation.create_view(name, replace=True)
    return relation
