"""Plain Parquet directories, adopted read-only with ``dal.register(..., format="parquet")``.

Version 0 is the directory as it is when registered (hive-style ``col=value`` partitions recognised), on
local disk or any object store. dal does not write this format: use Delta for data that changes.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from dal.catalog.types import Schema, VersionDraft, VersionInfo
from dal.errors import DalError, FormatError
from dal.formats.base import DataFile, Format, Recorded, WriteOptions, WriteTransaction
from dal.formats.catalog_schema import from_arrow
from dal.formats.directory import data_files, describe_files, partition_values, scan_directory
from dal.storage.location import Location
from dal.storage.partitions import arrow_type, infer_type


class ParquetFormat(Format):
    """A directory of Parquet files, as one immutable version."""

    name = "parquet"
    writable = False

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        return bool(data_files(Location.of(location, storage_options)))

    def begin(self, location: str, opts: WriteOptions, latest: VersionInfo | None) -> WriteTransaction:
        raise DalError("dal registers plain Parquet read-only; write with format='delta'")

    def snapshots(
        self,
        location: str,
        storage_options: Mapping[str, str],
        *,
        after: int | None,
        previous: Schema | None,
        partition_types: Mapping[str, pa.DataType] | None = None,
        last: Recorded | None = None,
    ) -> list[VersionDraft]:
        if after is not None:
            return []  # adopted once; the directory is not watched for changes
        loc = Location.of(location, storage_options)
        files = scan_directory(loc)
        schema = self._schema(loc, [f.path for f in files], partition_types or {})
        draft = describe_files(files, from_arrow(schema), previous=None, number=0)
        return [draft]

    def _schema(self, loc: Location, files: list[str], declared: Mapping[str, pa.DataType]) -> pa.Schema:
        """The files' schema plus the partition columns, typed as given (``declared``: dal.register's
        partition_types, a Hive table's keys), else as the writer's summary file (``_common_metadata`` /
        ``_metadata``) has them, else from the directory names (``dal.partitions.infer_type``)."""
        if not files:
            raise FormatError(f"no Parquet files in {loc.uri}")
        schema = pq.read_schema(loc.path(files[0]), filesystem=loc.fs)
        values: dict[str, set[str | None]] = {}
        for rel in files:
            for k, v in partition_values(rel):
                values.setdefault(k, set()).add(v)
        written = self._summary_schema(loc) if any(k not in declared for k in values) else None
        parts = []
        for k, vs in values.items():
            if k in schema.names:
                continue
            if k in declared:
                typ = declared[k]
            elif written is not None and k in written.names:
                typ = written.field(k).type
            else:
                typ = infer_type(vs)
            parts.append(pa.field(k, typ))
        return pa.schema(list(schema) + parts)

    @staticmethod
    def _summary_schema(loc: Location) -> pa.Schema | None:
        """The full schema a writer recorded beside the files (pyarrow's and Spark's summary files), if any."""
        for name in ("_common_metadata", "_metadata"):
            if loc.exists(name):
                try:
                    return pq.read_schema(loc.path(name), filesystem=loc.fs)
                except (OSError, pa.ArrowException):
                    continue
        return None

    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        loc = Location.of(location, storage_options)
        return [DataFile(loc.child(rel), size, None, partition_values(rel)) for rel, size in data_files(loc)]

    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        """The files' schema, partition columns typed as the catalog recorded them when the directory was
        registered (the directory names alone cannot say a partition is a date, an int32 or a timestamp)."""
        loc = Location.of(location, storage_options)
        recorded = {}
        for f in version.schema:
            if f.name in version.partition_columns:
                try:
                    recorded[f.name] = arrow_type(f.type)
                except DalError:
                    pass
        return self._schema(loc, [rel for rel, _ in data_files(loc)], recorded)
