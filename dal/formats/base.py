"""The Format interface each storage format implements, and the registry of formats."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import pyarrow as pa
import pyarrow.dataset as pads

from catalog.types import Schema, VersionDraft, VersionInfo
from dal.errors import DalError

WriteMode = Literal["append", "overwrite"]
SchemaMode = Literal["merge", "overwrite"] | None


@dataclass(frozen=True)
class WriteOptions:
    """How to write: validated by ``dal.api`` before a format sees them."""

    mode: WriteMode = "append"
    partition_by: tuple[str, ...] = ()
    schema_mode: SchemaMode = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    commit_metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DataFile:
    """One data file of a pinned version: absolute URI, size, rows, and its partition values."""

    uri: str
    size_bytes: int
    row_count: int | None
    partition_values: tuple[tuple[str, str | None], ...]
    deleted_rows: tuple[int, ...] = ()  # positions (in the file) a Delta deletion vector removes


class Format(ABC):
    """A storage format: commits data as immutable storage versions and describes them to the catalog."""

    name: ClassVar[str]

    @abstractmethod
    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        """Whether a table of this format is at ``location``."""

    @abstractmethod
    def check_write(self, location: str, schema: pa.Schema, opts: WriteOptions) -> None:
        """Refuse (``SchemaMismatch``) a write that does not fit the table, before anything is written."""

    @abstractmethod
    def write(self, location: str, data: pa.RecordBatchReader, opts: WriteOptions) -> int:
        """Commit ``data`` as one new storage version and return its number."""

    @abstractmethod
    def snapshots(
        self, location: str, storage_options: Mapping[str, str], *, after: int | None, previous: Schema | None
    ) -> list[VersionDraft]:
        """Describe every storage version newer than ``after`` (all when None), oldest first."""

    @abstractmethod
    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        """The data files of one pinned version (refusing features the plain reader cannot honour)."""

    @abstractmethod
    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        """The full Arrow schema (partition columns included) of one pinned version."""

    def physical_schema(self, schema: pa.Schema) -> pa.Schema | None:
        """``schema`` (a version's ``arrow_schema``) with each field named as in the data files, when that
        differs (Delta column mapping); None when the files use the logical names. No I/O."""
        return None

    @abstractmethod
    def arrow_dataset(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pads.Dataset:
        """A pyarrow dataset over exactly the files of one pinned version, partition columns restored."""


_FORMATS: dict[str, tuple[str, str, str]] = {
    # name: (module, class, extra to install)
    "delta": ("dal.formats.delta", "DeltaFormat", "delta"),
    "petastorm": ("dal.formats.petastorm", "PetastormFormat", "images"),
    "parquet": ("dal.formats.parquet", "ParquetFormat", "pandas"),
}


def get_format(name: str) -> Format:
    """The format called ``name``.

    Raises:
        DalError: unknown format. MissingDependency: its extra is not installed (with the pip command).
    """
    import importlib

    if name not in _FORMATS:
        raise DalError(f"unknown format {name!r}; dal supports: {', '.join(sorted(_FORMATS))}")
    module, cls, _extra = _FORMATS[name]
    fmt: Format = getattr(importlib.import_module(module), cls)()
    return fmt
