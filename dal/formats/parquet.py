"""Plain Parquet directories, adopted read-only with ``dal.register(..., format="parquet")``.

Version 0 is the directory as it is when registered (hive-style ``col=value`` partitions recognised).
dal does not write this format: use Delta for data that changes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from catalog.types import Schema, VersionDraft, VersionInfo
from dal import io
from dal.errors import DalError, FormatError
from dal.formats.base import DataFile, Format, WriteOptions
from dal.formats.fragments import dataset_from_files
from dal.formats.petastorm import _data_files, _partition_values, describe_files
from dal.schema import from_arrow


class ParquetFormat(Format):
    """A directory of Parquet files, as one immutable version."""

    name = "parquet"

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        if not io.is_local(location):
            raise DalError("plain Parquet datasets on object storage are not supported yet (local paths only)")
        return os.path.isdir(location) and bool(_data_files(location))

    def check_write(self, location: str, schema: pa.Schema, opts: WriteOptions) -> None:
        raise DalError("dal registers plain Parquet read-only; write with format='delta'")

    def write(self, location: str, data: pa.RecordBatchReader, opts: WriteOptions) -> int:
        raise DalError("dal registers plain Parquet read-only; write with format='delta'")

    def snapshots(
        self, location: str, storage_options: Mapping[str, str], *, after: int | None, previous: Schema | None
    ) -> list[VersionDraft]:
        if after is not None:
            return []  # adopted once; the directory is not watched for changes
        arrow = self._schema(location)
        draft = describe_files(location, _data_files(location), from_arrow(arrow), previous=None, number=0)
        return [draft]

    def _schema(self, location: str) -> pa.Schema:
        files = _data_files(location)
        if not files:
            raise FormatError(f"no Parquet files in {location}")
        schema = pq.read_schema(os.path.join(location, files[0]))
        values: dict[str, set[str | None]] = {}
        for rel in files:
            for k, v in _partition_values(rel):
                values.setdefault(k, set()).add(v)
        # as pyarrow's hive discovery: integer-looking partition values are int64, others strings
        parts = [
            pa.field(k, pa.int64() if all(v is None or v.lstrip("-").isdigit() for v in vs) else pa.string())
            for k, vs in values.items()
            if k not in schema.names
        ]
        return pa.schema(list(schema) + parts)

    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        return [
            DataFile(
                os.path.join(location, rel), os.path.getsize(os.path.join(location, rel)), None, _partition_values(rel)
            )
            for rel in _data_files(location)
        ]

    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        return self._schema(location)

    def arrow_dataset(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pads.Dataset:
        files = self.files(location, version, storage_options)
        return dataset_from_files(
            files, self.arrow_schema(location, version, storage_options), location, storage_options
        )
