"""A pinned version as the read engine sees it: ``Pinned``, a frozen value (``dal.Dataset`` is one), and its cache.

``Pinned`` holds the catalog's frozen values (``DatasetInfo``, ``VersionInfo``), the storage options, and a
``PlanCache`` of what is read once per opened version (file list, file index, schema, query plans). The
public ``dal.Dataset`` extends it with the reading methods; the read engine takes a ``Pinned`` and never
needs more.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal.catalog.types import DatasetInfo, Schema, VersionInfo
from dal.errors import FormatError, translating
from dal.formats.base import DataFile, Format
from dal.formats.index import FileIndex
from dal.formats.registry import get_format
from dal.read.stats import StatsBox
from dal.read.tasks import ReadTask

if TYPE_CHECKING:  # imported where used: pyarrow.dataset imports pandas (~0.25 s CPU of a first open)
    import pyarrow.dataset as pads

PLAN_CACHE = 32  # plans (per filter and window) kept per opened version


@dataclass
class QueryPlan:
    """What one (filters, window) costs to find out once: its tasks, their footers, matching-row counts."""

    tasks: list[ReadTask] | None = None
    file_tasks: Sequence[ReadTask] | None = None  # without a filter: one task per file, from the log's counts
    expanded: dict[str, list[ReadTask]] = field(default_factory=dict)  # a file task's row groups, by file
    fragments: dict[str, pads.ParquetFileFragment] = field(default_factory=dict)
    matching: dict[tuple[str, int], int] = field(default_factory=dict)
    # per projection (None: every column): (largest decoded row group of those columns, its rows)
    row_group_bytes: dict[tuple[str, ...] | None, tuple[int, int]] = field(default_factory=dict)
    # (files of the version, files kept by partition and window pruning, their row groups, row groups kept)
    pruning: tuple[int, int, int, int] | None = None
    pid: int = field(default_factory=os.getpid)  # the process whose filesystem clients ``fragments`` hold


class PlanCache:
    """Per opened version: its file list, schemas, and the last ``PLAN_CACHE`` query plans (LRU).

    Thread-safe: the read-ahead thread and DataLoader/tf.data threads plan too."""

    def __init__(self, size: int = PLAN_CACHE) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._queries: OrderedDict[str, QueryPlan] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers get a copy: locks do not pickle
        return {"size": self.size, "_values": dict(self._values), "_queries": OrderedDict(self._queries)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def value(self, key: str, compute: Any) -> Any:
        """The cached value of ``key`` (files, schema, …), computed once by ``compute()``."""
        if key not in self._values:
            value = compute()  # outside the lock: it may do I/O; a race computes it twice, harmlessly
            with self._lock:
                self._values.setdefault(key, value)
        return self._values[key]

    def query(self, filters: tuple[Any, ...], window: object) -> QueryPlan:
        """The plan of these filters and window (bound expressions have no hash: keyed by their repr)."""
        key = repr((filters, window))
        with self._lock:
            plan = self._queries.get(key)
            if plan is None:
                plan = self._queries[key] = QueryPlan()
                while len(self._queries) > self.size:
                    self._queries.popitem(last=False)  # least recently used
            else:
                self._queries.move_to_end(key)
            return plan

    def __len__(self) -> int:
        return len(self._queries)


@dataclass(frozen=True)
class Pinned:
    """One pinned version of a dataset as planning and reading need it; ``stats_`` collects every read of it."""

    info: DatasetInfo
    version: VersionInfo
    storage_options: Mapping[str, str] = field(default_factory=dict, repr=False)
    plan_cache: PlanCache = field(default_factory=PlanCache, repr=False, compare=False)
    stats_: StatsBox = field(default_factory=StatsBox, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def number(self) -> int:
        return self.version.number

    @property
    def schema(self) -> Schema:
        return self.version.schema

    @property
    def location(self) -> str:
        return self.info.location

    @cached_property
    def _format(self) -> Format:
        return get_format(self.info.format)

    @translating("reading {self.name} version {self.number}")
    def files(self) -> list[DataFile]:
        """The data files this version pins, in a deterministic order (listed once: a version is immutable)."""

        def listed() -> list[DataFile]:
            index = self.file_index()
            if index is not None:
                return index.data_files()
            return self._format.files(self.location, self.version, self.storage_options)

        files: list[DataFile] = self.plan_cache.value("files", listed)
        return list(files)

    @translating("reading {self.name} version {self.number}")
    def file_index(self) -> FileIndex | None:
        """The files with their recorded statistics as columns (formats that record them; else None), listed
        once: planning prunes them before making one object per file."""
        index: FileIndex | None = self.plan_cache.value(
            "index", lambda: self._format.file_index(self.location, self.version, self.storage_options)
        )
        return index

    @translating("reading {self.name} version {self.number}")
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of this version (partition columns included; tensor fields as stored)."""
        schema: pa.Schema = self.plan_cache.value(
            "schema", lambda: self._format.arrow_schema(self.location, self.version, self.storage_options)
        )
        return schema

    def physical_schema(self) -> pa.Schema | None:
        """The schema as the data files name it, when that differs (Delta column mapping); else None."""
        physical: pa.Schema | None = self.plan_cache.value(
            "physical", lambda: self._format.physical_schema(self.arrow_schema())
        )
        return physical

    def _has_tensors(self, names: list[str]) -> bool:
        return any((f := self.schema.get(n)) is not None and f.codec not in (None, "scalar") for n in names)

    def decode(self, table: pa.Table) -> dict[str, Any]:
        """Columns of ``table`` as NumPy, tensor fields decoded by their codecs (see ``to_numpy``).

        Args:
            table: Rows of this dataset (as read).

        Raises:
            FormatError: a value its codec cannot decode."""
        from dal.tensors.schema import decode_table

        return decode_table(table, self.schema)


@contextmanager
def translate_missing(ds: Pinned) -> Iterator[None]:
    """A data file the version pins that is gone (vacuumed) becomes a FormatError naming the version."""
    try:
        yield
    except FileNotFoundError as e:
        raise FormatError(
            f"{ds.name} version {ds.number} (storage version {ds.version.storage_version}) is no longer readable: "
            f"a file it pins is gone ({e}); was it removed by a VACUUM?"
        ) from e
