"""Rows into Petastorm files: values checked and encoded with the TensorSchema's codecs, written as Parquet
files (one per partition value), and the ``_common_metadata`` petastorm readers need."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dal import progress
from dal.errors import DalError, SchemaMismatch
from dal.formats.directory import (
    FileEntry,
    partition_values,
)
from dal.formats.petastorm.records import COMMON_METADATA
from dal.formats.petastorm.unischema import ROW_GROUPS_PER_FILE_KEY, UNISCHEMA_KEY, dumps_unischema
from dal.storage.location import Location
from dal.storage.partitions import partition_dir, split_by_partition
from dal.tensors.schema import TensorSchema

ROW_GROUP_ROWS = 10_000


def encode(schema: TensorSchema, columns: Mapping[str, Sequence[Any]], partition_by: Sequence[str]) -> pa.Table:
    """Encode every field with its codec, checking dtype and shape first; nothing is written here.

    A nullable field the data lacks is written as nulls (as Delta appends do).

    Raises:
        SchemaMismatch: a column that is not nullable is missing, one is extra, or a value has the wrong
            dtype/shape (names field and row).
    """
    columns = with_absent_nulls(schema, columns)
    missing = [f.name for f in schema if f.name not in columns]
    extra = [c for c in columns if c not in schema.names]
    if missing or extra:
        raise SchemaMismatch(
            "data does not match the schema: "
            + "; ".join(
                p for p in (f"missing {missing}" if missing else "", f"not in the schema {extra}" if extra else "") if p
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


def write_files(
    loc: Location,
    directory: str,
    table: pa.Table,
    partition_by: list[str],
    prefix: str = "part",
    compression: str = "snappy",
) -> list[FileEntry]:
    """Write an encoded table under ``directory``, one file per partition value, with the Parquet codec
    ``compression`` (pyarrow's name); describe each file."""
    token = uuid.uuid4().hex
    groups = sorted(split_by_partition(table, partition_by), key=lambda kv: str(kv[0]))
    written = []
    for i, (values, part) in enumerate(groups):
        subdir = partition_dir(values)
        name = f"{prefix}-{i:05d}-{token}.parquet"
        rel = f"{subdir}/{name}" if subdir else name
        full = f"{directory}/{rel}"
        loc.makedirs(full.rsplit("/", 1)[0])
        collected: list[Any] = []
        # petastorm (like Spark) keeps partition columns out of the files
        pq.write_table(
            part.drop_columns(partition_by),
            loc.path(full),
            filesystem=loc.fs,
            row_group_size=ROW_GROUP_ROWS,
            compression=compression,
            metadata_collector=collected,
        )
        size = int(loc.fs.get_file_info(loc.path(full)).size or 0)
        written.append(FileEntry(rel, size, part.num_rows, collected[0].num_row_groups))
        progress.current().advance(part.num_rows, files=1, bytes=size)  # on a terminal's progress line only
    return written


def _write_common_metadata(loc: Location, directory: str, schema: TensorSchema, files: Sequence[FileEntry]) -> None:
    """``_common_metadata`` as petastorm's materialize_dataset leaves it: the Arrow schema of the data
    columns, the pickled Unischema and the row-group count of every file."""
    counts = {f.path: f.row_groups for f in files}
    parts = {k for f in files for k, _ in partition_values(f.path)}
    arrow = pa.schema([f for f in schema.arrow_schema() if f.name not in parts])
    arrow = arrow.with_metadata(
        {UNISCHEMA_KEY: dumps_unischema(schema), ROW_GROUPS_PER_FILE_KEY: json.dumps(counts).encode()}
    )
    loc.makedirs(directory)
    pq.write_metadata(arrow, loc.path(f"{directory}/{COMMON_METADATA}"), filesystem=loc.fs)


def _columns(data: Any) -> dict[str, list[Any]]:
    """Columns of Python/NumPy values from a pandas DataFrame, a dict of columns, or a list of row dicts."""
    if type(data).__module__.partition(".")[0] == "pandas" and type(data).__name__ == "DataFrame":
        return {str(c): list(data[c]) for c in data.columns}
    if isinstance(data, dict):
        return {str(k): list(v) for k, v in data.items()}
    if isinstance(data, pa.Table | pa.RecordBatch):
        return {str(n): data.column(n).to_pylist() for n in data.schema.names}
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        names = list(data[0]) if data else []
        return {n: [r.get(n) for r in data] for n in names}
    raise DalError(
        f"cannot write {type(data).__name__} as petastorm: pass a pandas DataFrame, a dict of columns or row dicts"
    )


def with_absent_nulls(schema: TensorSchema, columns: Mapping[str, Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """``columns`` with every nullable field of ``schema`` they lack added as nulls (rows: the other columns')."""
    absent = [f.name for f in schema if f.nullable and f.name not in columns]
    if not absent or not columns:
        return dict(columns)
    rows = len(next(iter(columns.values())))
    return {**columns, **{n: [None] * rows for n in absent}}


def _as_tensors(schema: TensorSchema, columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Tensor values as NumPy arrays of the field's dtype (Arrow and Spark hand them over as nested lists).

    Raises:
        SchemaMismatch: a cell holds a null element (a tensor has no nulls), naming the field and the row.
    """
    for f in schema:
        if f.shape != () and f.name in columns:
            columns[f.name] = [
                v if v is None or isinstance(v, np.ndarray) else _tensor(f.name, f.dtype, row, v)
                for row, v in enumerate(columns[f.name])
            ]
    return columns


def _tensor(name: str, dtype: Any, row: int, value: Any) -> np.ndarray:
    if _holds_none(value):
        fill = "F.transform(col, lambda x: F.coalesce(x, F.lit(0)))"
        raise SchemaMismatch(
            f"field {name!r}, row {row}: the array holds a null element, which a tensor cannot store; fill the "
            f"nulls first (e.g. {fill}, or NaN for floats) or leave the whole cell null"
        )
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise SchemaMismatch(f"field {name!r}, row {row}: not an array of {np.dtype(dtype).name} ({e})") from None


def _holds_none(value: Any) -> bool:
    """Whether a nested list (as Arrow's ``to_pylist`` gives an array cell) holds a None at any depth."""
    if value is None:
        return True
    if isinstance(value, list | tuple):
        return any(_holds_none(v) for v in value)
    return False
