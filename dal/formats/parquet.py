"""Plain Parquet directories, adopted read-only with ``dal.register(..., format="parquet")``.

Version 0 is the directory as it is when registered (hive-style ``col=value`` partitions recognised), on
local disk or any object store. dal does not write this format: use Delta for data that changes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from catalog.types import Schema, VersionDraft, VersionInfo
from dal.errors import DalError, FormatError
from dal.formats.base import DataFile, Format, WriteOptions, WriteTransaction
from dal.formats.catalog_schema import from_arrow
from dal.formats.directory import data_files, describe_files, partition_values, scan_directory
from dal.storage.location import Location


class ParquetFormat(Format):
    """A directory of Parquet files, as one immutable version."""

    name = "parquet"
    writable = False

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        return bool(data_files(Location.of(location, storage_options)))

    def begin(self, location: str, opts: WriteOptions, latest: VersionInfo | None) -> WriteTransaction:
        raise DalError("dal registers plain Parquet read-only; write with format='delta'")

    def snapshots(
        self, location: str, storage_options: Mapping[str, str], *, after: int | None, previous: Schema | None
    ) -> list[VersionDraft]:
        if after is not None:
            return []  # adopted once; the directory is not watched for changes
        loc = Location.of(location, storage_options)
        files = scan_directory(loc)
        draft = describe_files(files, from_arrow(self._schema(loc, [f.path for f in files])), previous=None, number=0)
        return [draft]

    def _schema(self, loc: Location, files: list[str]) -> pa.Schema:
        if not files:
            raise FormatError(f"no Parquet files in {loc.uri}")
        schema = pq.read_schema(loc.path(files[0]), filesystem=loc.fs)
        values: dict[str, set[str | None]] = {}
        for rel in files:
            for k, v in partition_values(rel):
                values.setdefault(k, set()).add(v)
        # as pyarrow's hive discovery: integer-looking partition values are int64, others strings
        parts = [
            pa.field(k, pa.int64() if all(v is None or v.lstrip("-").isdigit() for v in vs) else pa.string())
            for k, vs in values.items()
            if k not in schema.names
        ]
        return pa.schema(list(schema) + parts)

    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        loc = Location.of(location, storage_options)
        return [DataFile(loc.child(rel), size, None, partition_values(rel)) for rel, size in data_files(loc)]

    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        loc = Location.of(location, storage_options)
        return self._schema(loc, [rel for rel, _ in data_files(loc)])
