"""Petastorm datasets (Parquet + a pickled Unischema), read and written without petastorm itself.

Versions: Petastorm has none, so each dal version of a dataset written by dal is a complete Petastorm
dataset in its own directory ``<location>/v<n>/``: an append hard-links (local) or copies the files of
the previous version and adds new ones (no file is ever rewritten), an overwrite starts empty. A write is
built in ``<location>/_staging_<id>/`` and renamed into place, so a killed write leaves no partial
version and two writers cannot take the same number. Petastorm readers open ``<location>/v<n>``.

A dataset petastorm wrote (``dal.register``) is adopted as version 0 at its own directory, untouched.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from catalog.types import Partition, Schema, VersionDraft, VersionInfo
from dal import io
from dal.errors import DalError, FormatError, SchemaMismatch
from dal.formats.base import DataFile, Format, WriteOptions
from dal.formats.fragments import dataset_from_files
from dal.formats.parquet_writer import NULL_PARTITION, partition_dir, partition_string
from dal.formats.petastorm_pickle import ROW_GROUPS_PER_FILE_KEY, UNISCHEMA_KEY, dumps_unischema, loads_unischema
from dal.tensors import TensorField, TensorSchema

COMMON_METADATA = "_common_metadata"
_VERSION_DIR = re.compile(r"^v(\d+)$")
ROW_GROUP_ROWS = 10_000


def _local(location: str) -> None:
    if not io.is_local(location):
        raise DalError("petastorm datasets on object storage are not supported yet (local paths only)")


def version_dirs(location: str) -> dict[int, str]:
    """The dal version directories under ``location`` (``v<n>``) by number."""
    if not os.path.isdir(location):
        return {}
    found = {}
    for name in os.listdir(location):
        m = _VERSION_DIR.match(name)
        if m and os.path.isfile(os.path.join(location, name, COMMON_METADATA)):
            found[int(m.group(1))] = name
    return found


def read_schema(dataset_dir: str) -> TensorSchema:
    """The Unischema of a Petastorm dataset directory (restricted unpickling).

    Raises:
        FormatError: no ``_common_metadata`` or no Unischema in it (not a Petastorm dataset).
    """
    path = os.path.join(dataset_dir, COMMON_METADATA)
    if not os.path.isfile(path):
        raise FormatError(f"{dataset_dir} is not a Petastorm dataset: it has no {COMMON_METADATA}")
    meta = pq.read_schema(path).metadata or {}
    if UNISCHEMA_KEY not in meta:
        raise FormatError(
            f"{dataset_dir} has no Petastorm schema ({UNISCHEMA_KEY.decode()}) in {COMMON_METADATA}; "
            "register it with format='parquet' if it is plain Parquet"
        )
    return loads_unischema(meta[UNISCHEMA_KEY])


def _partition_values(relpath: str) -> tuple[tuple[str, str | None], ...]:
    out = []
    for part in relpath.split("/")[:-1]:
        if "=" in part:
            k, v = part.split("=", 1)
            out.append((k, None if v == NULL_PARTITION else unquote(v)))
    return tuple(out)


def _data_files(dataset_dir: str) -> list[str]:
    """Parquet files of a Petastorm dataset, relative, sorted; '_' and '.' entries are not data."""
    out = []
    for root, dirs, files in os.walk(dataset_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        rel = os.path.relpath(root, dataset_dir)
        for f in sorted(files):
            if not f.startswith(("_", ".")) and f.endswith(".parquet"):
                out.append(f if rel == "." else f"{rel}/{f}")
    return out


class PetastormFormat(Format):
    """Petastorm datasets, byte-compatible with petastorm 0.13.1's make_reader / make_batch_reader."""

    name = "petastorm"

    # -- where versions live ----------------------------------------------------------------------

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        _local(location)
        return bool(version_dirs(location)) or os.path.isfile(os.path.join(location, COMMON_METADATA))

    def _dir_of(self, location: str, storage_version: int) -> str:
        dirs = version_dirs(location)
        if storage_version in dirs:
            return os.path.join(location, dirs[storage_version])
        if storage_version == 0 and os.path.isfile(os.path.join(location, COMMON_METADATA)):
            return location  # a dataset petastorm wrote, adopted as it is
        raise FormatError(f"Petastorm version {storage_version} of {location} is missing")

    def petastorm_url(self, location: str, version: VersionInfo) -> str:
        assert version.storage_version is not None
        return io.to_uri(self._dir_of(location, version.storage_version))

    # -- writing --------------------------------------------------------------------------------

    def check_write(self, location: str, schema: pa.Schema, opts: WriteOptions) -> None:
        raise DalError("petastorm writes need a TensorSchema: use write_tensors")  # pragma: no cover

    def write(self, location: str, data: pa.RecordBatchReader, opts: WriteOptions) -> int:
        raise DalError("petastorm writes need a TensorSchema: use write_tensors")  # pragma: no cover

    def encode(
        self, schema: TensorSchema, columns: Mapping[str, Sequence[Any]], partition_by: Sequence[str]
    ) -> pa.Table:
        """Encode every field with its codec, checking dtype and shape first; nothing is written here.

        Raises:
            SchemaMismatch: a column is missing or extra, or a value has the wrong dtype/shape (names field and row).
        """
        missing = [f.name for f in schema if f.name not in columns]
        extra = [c for c in columns if c not in schema.names]
        if missing or extra:
            raise SchemaMismatch(
                "data does not match the schema: "
                + "; ".join(
                    p
                    for p in (f"missing {missing}" if missing else "", f"not in the schema {extra}" if extra else "")
                    if p
                )
            )
        bad_parts = [c for c in partition_by if c not in schema.names]
        if bad_parts:
            raise SchemaMismatch(f"partition_by names columns not in the schema: {bad_parts}")
        arrays = []
        for f in schema:
            values = columns[f.name]
            if not f.nullable:
                nulls = [i for i, v in enumerate(values) if v is None]
                if nulls:
                    raise SchemaMismatch(f"field {f.name!r}, row {nulls[0]}: None in a field that is not nullable")
            arrays.append(f.the_codec.encode(f.name, f.dtype_name, f.shape, list(values)))
        return pa.Table.from_arrays(arrays, schema=schema.arrow_schema())

    def write_tensors(
        self, location: str, schema: TensorSchema, table: pa.Table, *, mode: str, partition_by: Sequence[str]
    ) -> int:
        """Commit an encoded table as the next version directory; return its number."""
        staging = self.new_staging(location)
        try:
            files = write_files(staging, table, list(partition_by))
            return self.commit_staged(location, schema, staging, files, mode=mode)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def new_staging(self, location: str) -> str:
        """A fresh private directory under ``location`` ('_' names are invisible to Petastorm readers)."""
        _local(location)
        staging = os.path.join(location, f"_staging_{uuid.uuid4().hex}")
        os.makedirs(staging)
        return staging

    def commit_staged(
        self, location: str, schema: TensorSchema, staging: str, new_files: Sequence[str], *, mode: str
    ) -> int:
        """Make staged files the next version: link the previous version's files (append) and the new ones
        into a fresh directory with its ``_common_metadata``, then rename it to ``v<n>`` (atomic)."""
        while True:
            dirs = version_dirs(location)
            previous = max(dirs) if dirs else None
            base = None
            if previous is not None:
                base = os.path.join(location, dirs[previous])
            elif os.path.isfile(os.path.join(location, COMMON_METADATA)):
                raise DalError(
                    f"{location} is a Petastorm dataset dal did not write (adopted as version 0); "
                    "appending to it is not supported yet: write a new dataset"
                )
            attempt = os.path.join(location, f"_staging_{uuid.uuid4().hex}")
            os.makedirs(attempt)
            if mode == "append" and base is not None:
                _link_tree(base, attempt)
            for rel in new_files:
                dst = os.path.join(attempt, rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.link(os.path.join(staging, rel), dst)
            _write_common_metadata(attempt, schema)
            number = 0 if previous is None else previous + 1
            try:
                os.rename(attempt, os.path.join(location, f"v{number}"))  # atomic; fails if taken
                return number
            except OSError:
                shutil.rmtree(attempt, ignore_errors=True)  # another writer took v<number>; retry

    # -- describing versions ----------------------------------------------------------------------

    def snapshots(
        self, location: str, storage_options: Mapping[str, str], *, after: int | None, previous: Schema | None
    ) -> list[VersionDraft]:
        _local(location)
        dirs = version_dirs(location)
        numbers = sorted(dirs) if dirs else ([0] if os.path.isfile(os.path.join(location, COMMON_METADATA)) else [])
        drafts = []
        for n in numbers:
            if after is not None and n <= after:
                continue
            draft = self._describe(location, n, previous)
            drafts.append(draft)
            previous = draft.schema
        return drafts

    def _describe(self, location: str, n: int, previous: Schema | None) -> VersionDraft:
        directory = self._dir_of(location, n)
        tensors = read_schema(directory)
        files = _data_files(directory)
        draft = describe_files(directory, files, tensors.to_catalog(), previous=previous, number=n)
        operation = draft.operation
        if operation == "append" and n > 0 and not set(_data_files(self._dir_of(location, n - 1))) <= set(files):
            operation = "overwrite"
        props = {"unischema": tensors.name, "path": os.path.relpath(directory, location)}
        return dataclasses.replace(draft, operation=operation, properties=props)

    # -- reading ----------------------------------------------------------------------------------

    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        assert version.storage_version is not None
        directory = self._dir_of(location, version.storage_version)
        return [
            DataFile(
                os.path.join(directory, rel),
                os.path.getsize(os.path.join(directory, rel)),
                None,
                _partition_values(rel),
            )
            for rel in _data_files(directory)
        ]

    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        return TensorSchema.from_catalog("schema", version.schema).arrow_schema()

    def arrow_dataset(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pads.Dataset:
        return dataset_from_files(
            self.files(location, version, storage_options),
            self.arrow_schema(location, version, storage_options),
            location,
            storage_options,
        )


def write_files(root: str, table: pa.Table, partition_by: list[str], prefix: str = "part") -> list[str]:
    """Write an encoded table under ``root``, one file per partition value; return the relative paths."""
    token = uuid.uuid4().hex
    groups: dict[tuple[tuple[str, str | None], ...], pa.Table] = {}
    if partition_by:
        keys = table.select(partition_by).group_by(partition_by).aggregate([]).to_pylist()
        for combo in keys:
            mask = None
            for c in partition_by:
                term = pc.is_null(table[c]) if combo[c] is None else pc.equal(table[c], combo[c])
                mask = term if mask is None else pc.and_(mask, term)
            groups[tuple((c, partition_string(combo[c])) for c in partition_by)] = table.filter(mask)
    else:
        groups[()] = table
    written = []
    for i, (values, part) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
        directory = partition_dir(values)
        name = f"{prefix}-{i:05d}-{token}.parquet"
        rel = f"{directory}/{name}" if directory else name
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        # petastorm (like Spark) keeps partition columns out of the files
        pq.write_table(part.drop_columns(partition_by), os.path.join(root, rel), row_group_size=ROW_GROUP_ROWS)
        written.append(rel)
    return written


def describe_files(
    directory: str, files: Sequence[str], schema: Schema, *, previous: Schema | None, number: int
) -> VersionDraft:
    """A version draft for the Parquet files of a directory: rows from the footers, hive partitions."""
    parts = [k for k, _ in _partition_values(files[0])] if files else []
    by_part: dict[tuple[tuple[str, str | None], ...], list[int]] = defaultdict(lambda: [0, 0, 0])
    rows = size = 0
    for rel in files:
        full = os.path.join(directory, rel)
        n_rows, n_bytes = pq.read_metadata(full).num_rows, os.path.getsize(full)
        rows, size = rows + n_rows, size + n_bytes
        acc = by_part[_partition_values(rel)]
        acc[0], acc[1], acc[2] = acc[0] + n_rows, acc[1] + 1, acc[2] + n_bytes
    marker = os.path.join(directory, COMMON_METADATA)
    stamp = os.path.getmtime(marker if os.path.exists(marker) else directory)
    operation = "create" if previous is None else ("schema-change" if previous != schema else "append")
    return VersionDraft(
        operation=operation,
        schema=schema,
        row_count=rows,
        file_count=len(files),
        size_bytes=size,
        storage_version=number,
        committed_at=datetime.fromtimestamp(stamp, UTC),
        partition_columns=tuple(parts),
        partitions=tuple(Partition(k, r, f, b) for k, (r, f, b) in sorted(by_part.items(), key=lambda kv: str(kv[0])))
        if parts
        else (),
    )


def _link_tree(src: str, dst: str) -> None:
    """Hard-link every data file of ``src`` into ``dst`` (same bytes, nothing rewritten)."""
    for rel in _data_files(src):
        target = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            os.link(os.path.join(src, rel), target)
        except OSError:
            shutil.copy2(os.path.join(src, rel), target)  # another filesystem: copy, never modify


def _write_common_metadata(directory: str, schema: TensorSchema) -> None:
    """``_common_metadata`` as petastorm's materialize_dataset leaves it: the Arrow schema of the data
    columns, the pickled Unischema and the row-group count of every file."""
    files = _data_files(directory)
    counts = {rel: pq.read_metadata(os.path.join(directory, rel)).num_row_groups for rel in files}
    parts = {k for rel in files for k, _ in _partition_values(rel)}
    arrow = pa.schema([f for f in schema.arrow_schema() if f.name not in parts])
    arrow = arrow.with_metadata(
        {UNISCHEMA_KEY: dumps_unischema(schema), ROW_GROUPS_PER_FILE_KEY: json.dumps(counts).encode()}
    )
    pq.write_metadata(arrow, os.path.join(directory, COMMON_METADATA))


def decode_table(table: pa.Table, schema: Schema) -> dict[str, Any]:
    """Decode every tensor field of ``table`` into NumPy (stacked when shapes agree); scalars as arrays."""
    out: dict[str, Any] = {}
    for name in table.column_names:
        field = schema.get(name)
        column = table.column(name).combine_chunks()
        if field is None or field.codec in (None, "scalar"):
            values = column.to_numpy(zero_copy_only=False)
            if field is not None and field.dtype not in (None, "str", "bytes") and values.dtype != object:
                values = values.astype(np.dtype(field.dtype), copy=False)
            out[name] = values
        else:
            tf = TensorField.from_catalog(field)
            out[name] = tf.the_codec.decode(tf.dtype_name, tf.shape, column)
    return out
