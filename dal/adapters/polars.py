"""Polars over a scan: a LazyFrame whose source is the scan's own reader.

The source is the read source's ``iter_chunks`` (the pinned version's planned files only, Delta deletion vectors and
column mapping honoured, the scan's projection and filters pushed into the Parquet reads). Polars pushes
its own projection into the scan (``select``) and applies its predicate to each chunk as it arrives; a
``head`` stops reading early. Nothing is read until the LazyFrame is collected.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal.errors import require

if TYPE_CHECKING:
    import polars as pl

    from dal.read.source import Version

__all__ = ["to_polars"]


def _empty(scan: Version) -> pa.Table:
    schema = scan.arrow_schema
    return pa.Table.from_batches([], schema=pa.schema([schema.field(n) for n in scan.output_names]))


def to_polars(scan: Version, lazy: bool = True) -> pl.LazyFrame | pl.DataFrame:
    """``scan`` as a polars ``LazyFrame`` (``lazy=True``) or a collected ``DataFrame``."""
    pl = require("polars", "polars")
    from polars.io.plugins import register_io_source

    schema = pl.from_arrow(_empty(scan)).schema

    def source(with_columns: list[str] | None, predicate: Any, n_rows: int | None, _batch: int | None) -> Iterator[Any]:
        narrowed = scan.with_columns(with_columns) if with_columns is not None else scan
        left = n_rows
        for chunk in narrowed.iter_chunks():
            df = pl.from_arrow(chunk)
            if predicate is not None:
                df = df.filter(predicate)
            if left is not None:
                df = df.head(left)
                left -= df.height
            yield df
            if left is not None and left <= 0:
                return

    # polars 1.3x names the source in explain(); 1.44 dropped those keywords: pass them only where accepted
    named: dict[str, Any] = {}
    if "explain_name" in inspect.signature(register_io_source).parameters:
        named = {"explain_name": "dal", "explain_detail": f"{scan.dataset.name} v{scan.dataset.number}"}
    frame = register_io_source(source, schema=schema, **named)
    return frame if lazy else frame.collect()
