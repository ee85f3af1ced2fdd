"""Dataset: a frozen handle on one pinned version of a catalog dataset."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, overload

import pyarrow as pa

from dal.errors import FilterError, require
from dal.feeds import Feeds
from dal.read.pinned import Pinned
from dal.read.source import Source
from dal.read.stats import ReadStats
from dal.scan import Draws, Scan
from dal.tensors.schema import to_pandas_cells

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl
    import ray.data
    from pyspark.sql import DataFrame as SparkDataFrame
    from pyspark.sql import SparkSession

    from dal.read.sharding import Remainder


def _is_1d(values: Any) -> bool:
    import numpy as np

    return isinstance(values, np.ndarray) and values.ndim == 1


@dataclass(frozen=True)
class Dataset(Pinned, Feeds, Draws):
    """One immutable version of a dataset: reading it always gives the same rows.

    Created by ``dal.open``; no data is read until a terminal method (``to_arrow``, ``iter_batches``, …).
    ``storage_options`` (credentials) live only in this process, never in the catalog.
    """

    catalog_url: str | None = field(default=None, repr=False, compare=False)  # the catalog that opened it

    def _scan_of(self, columns: list[str] | None) -> Scan:
        if columns is None:
            return self.scan()
        if isinstance(columns, str) or not isinstance(columns, list | tuple):
            raise FilterError(f"columns must be a list of column names, not {type(columns).__name__}")
        return self.select(*columns)

    def to_arrow(self, columns: list[str] | None = None) -> pa.Table:
        """This version as one Arrow table (tensor fields as stored; see ``to_numpy`` for decoded).

        Args:
            columns: Only these columns (default: all).
        """
        return self._scan_of(columns).to_arrow()

    def iter_batches(self, batch_size: int = 65_536, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
        """Stream record batches of ``batch_size`` rows (the last may be shorter), in file order.

        Args:
            batch_size: Rows per batch.
            columns: Only these columns (default: all).
        """
        return self._scan_of(columns).iter_batches(batch_size)

    def to_pandas(self, columns: list[str] | None = None) -> pd.DataFrame:
        """A DataFrame; tensor fields (ndarray, image codecs) are decoded into NumPy arrays per cell, and a
        fixed-shape tensor column (Delta) holds one (*shape) array per cell (None for a null cell).

        Args:
            columns: Only these columns (default: all).
        """
        pd = require("pandas", "pandas")  # before reading: pyarrow's to_pandas says only "No module named 'pandas'"
        table = self.to_arrow(columns)
        if not self._has_tensors(table.column_names):
            return to_pandas_cells(table)  # a fixed-shape tensor column: one (*shape) array per cell

        decoded = self.decode(table)
        return pd.DataFrame({k: list(v) if not _is_1d(v) else v for k, v in decoded.items()})

    def to_numpy(self, columns: list[str] | None = None) -> dict[str, Any]:
        """Each column as NumPy: tensor fields decoded and stacked to (rows, *shape) when their shapes agree,
        else a list of arrays; scalar fields as 1-d arrays of their dtype. A fixed-shape tensor column (Delta
        ``FixedSizeList``, nested for N-D) is one (rows, *shape) array of its value type; when it holds nulls, an
        object array of one (*shape) array per row, None for a null cell.

        Args:
            columns: Only these columns (default: all).
        """
        return self.decode(self.to_arrow(columns))

    def iter_numpy(self, batch_size: int = 1024, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
        """Stream decoded batches (as ``to_numpy``) of at most ``batch_size`` rows.

        Args:
            batch_size: Rows per batch at most.
            columns: Only these columns (default: all).
        """
        for batch in self.iter_batches(batch_size, columns):
            yield self.decode(pa.Table.from_batches([batch]))

    @property
    def petastorm_url(self) -> str:
        """Where petastorm's own ``make_reader`` can read this version (Petastorm datasets only)."""
        return self._format.native_url(self.location, self.version, self.storage_options)

    def count(self) -> int:
        """The number of rows of this version, as the catalog recorded it (nothing is read)."""
        return self.version.row_count

    def stats(self) -> ReadStats:
        """What every read of this opened version did, through any of its scans (see ``Scan.stats``)."""
        return self.stats_.get(self.name, self.number)

    # -- the reader: each call returns an immutable Scan (see dal.scan) ---------------------------

    def scan(self) -> Scan:
        """A Scan of this whole version, to narrow with select / filter / window / shard / shuffle."""
        return Scan(self)

    def changes(self, since: int | Dataset | None) -> Scan:
        """A Scan of the rows versions ``since`` (exclusive) up to this one (inclusive) inserted and deleted, each
        with ``_change_type`` (``insert``, ``delete``; ``update_preimage`` / ``update_postimage`` where a Delta
        change data feed records them), ``_commit_version`` (the catalog's version number) and
        ``_commit_timestamp``, in commit order, projected onto this version's schema (columns a version in the
        range lacked are null). Versions that change no data (``dal optimize``, tag-only versions) contribute
        nothing. Narrow it like any scan (select, filter — on the change columns too —, window, shard,
        shuffle) and feed it anywhere rows go (``to_torch``, ``to_tf``, ``to_arrow``, …). See
        ``dal.read.changed`` and docs/changes.md.

        Args:
            since: A version number, a ``Dataset`` of an earlier version, or None (from the first version:
                every row of the history as an insert, then the deletes).

        Raises:
            DalError: ``since`` is not a recorded version of this dataset, or after this one.
            ChangesUnavailable: the history cannot say exactly what changed (a version in the range expired,
                its files reclaimed, or its commit gone from the log): never a partial answer.
        """
        from dal.errors import DalError, check_int

        if isinstance(since, Dataset):
            if since.name != self.name:
                raise DalError(f"changes(since=...) of {self.name} takes a version of {self.name}, not of {since.name}")
            since = since.number
        elif since is not None:
            since = check_int(since, "since", minimum=0)
        versions = self._recorded_versions()
        if since is not None and since > self.number:
            raise DalError(f"changes(since={since}) of {self.name} version {self.number}: since is after this version")
        if since is not None and since not in {v.number for v in versions}:
            raise DalError(f"{self.name} has no version {since} (since)")
        return Scan(self, changes_=(since, tuple(versions)))

    def _recorded_versions(self) -> list[Any]:
        """Every recorded version of this dataset, from the catalog that opened it."""
        from dal.catalog import remote
        from dal.catalog.home import default_url

        url = self.catalog_url or default_url()
        if remote.is_remote(url):
            return list(remote.client(url).versions(self.name))
        from dal.catalog import Catalog

        cat = Catalog(url, must_exist=True)
        try:
            return list(cat.versions(self.name))
        finally:
            cat.close()  # its engine and its file watcher: one per call, not one per call left open

    def _as_scan(self) -> Scan:  # sample / balance (dal.scan.Draws)
        return self.scan()

    def _feed(self) -> Source:  # to_torch / to_tf (dal.feeds.Feeds)
        return self.scan()._source

    def select(self, *columns: str) -> Scan:
        """A scan of this version reading only ``columns`` (see ``Scan.select``).

        Args:
            *columns: Column names.
        """
        return self.scan().select(*columns)

    def filter(self, condition: Any) -> Scan:
        """A scan of this version keeping the rows matching ``condition`` (see ``Scan.filter``).

        Args:
            condition: A ``dal.col`` expression or a SQL WHERE string.
        """
        return self.scan().filter(condition)

    def window(self, start: Any, end: Any, column: str | None = None) -> Scan:
        """A scan of the rows with ``start <= column < end`` (see ``Scan.window``).

        Args:
            start: Lower bound (None: open).
            end: Upper bound, excluded (None: open).
            column: The time column (default: the dataset's).
        """
        return self.scan().window(start, end, column)

    def shard(self, rank: int, world_size: int, remainder: Remainder = "pad") -> Scan:
        """This rank's share of the rows (see ``Scan.shard``).

        Args:
            rank: This process's rank.
            world_size: The number of ranks.
            remainder: ``pad`` (equal rows: some repeated), ``drop`` (equal rows: the rest dropped) or ``keep``.
        """
        return self.scan().shard(rank, world_size, remainder)

    def shuffle(self, seed: int, buffer_size: int = 10_000) -> Scan:
        """A scan reading this version in a seeded per-epoch order (see ``Scan.shuffle``).

        Args:
            seed: The order's seed.
            buffer_size: Rows a chunk holds at least.
        """
        return self.scan().shuffle(seed, buffer_size)

    def sequences(
        self,
        length: int,
        step: int = 1,
        *,
        column: str | None = None,
        by: str | None = None,
        max_gap: timedelta | float | None = None,
    ) -> Iterator[pa.Table]:
        """Fixed-length, time-ordered windows of rows (see ``Scan.sequences``).

        Args:
            length: Rows per window.
            step: Rows between window starts.
            column: The time column (default: the dataset's).
            by: Entity column windows never cross.
            max_gap: Largest time step inside a window.
        """
        return self.scan().sequences(length, step, column=column, by=by, max_gap=max_gap)

    def to_spark(self, spark: SparkSession | None = None) -> SparkDataFrame:
        """This exact version as a Spark DataFrame (delta-spark ``versionAsOf`` when its classes are present,
        otherwise plain Parquet over this version's file list with partition columns restored).

        Args:
            spark: The SparkSession (default: the active one).
        """
        return self.scan().to_spark(spark)

    @overload
    def to_polars(self, lazy: Literal[True] = ...) -> pl.LazyFrame: ...
    @overload
    def to_polars(self, lazy: Literal[False]) -> pl.DataFrame: ...
    @overload
    def to_polars(self, lazy: bool) -> pl.LazyFrame | pl.DataFrame: ...
    def to_polars(self, lazy: bool = True) -> pl.LazyFrame | pl.DataFrame:
        """This whole version as a polars LazyFrame (see ``Scan.to_polars``).

        Args:
            lazy: A LazyFrame (True) or a collected DataFrame (False).
        """
        return self.scan().to_polars(lazy)

    def to_duckdb(
        self, connection: duckdb.DuckDBPyConnection | None = None, name: str | None = None
    ) -> duckdb.DuckDBPyRelation:
        """This whole version as a DuckDB relation (see ``Scan.to_duckdb``).

        Args:
            connection: A DuckDB connection (default: a new in-memory one).
            name: Also register the relation as this view.
        """
        return self.scan().to_duckdb(connection, name)

    def to_ray(self, **read_args: Any) -> ray.data.Dataset:
        """This whole version as a Ray Dataset (see ``Scan.to_ray``).

        Args:
            **read_args: ``ray.data.read_datasource``'s keyword arguments.
        """
        return self.scan().to_ray(**read_args)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, version={self.number}, rows={self.version.row_count})"
