"""Write a stream of Arrow batches as hive-partitioned Parquet files with Delta statistics (``delta.stats``).

Runs on Spark executors (``dal.spark``): pure pyarrow, no Spark or delta-rs imports.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dal.formats.delta.stats import FileStats
from dal.storage import uris
from dal.storage.partitions import blank_as_null, partition_dir, split_by_partition


@dataclass
class _OpenFile:
    relpath: str
    writer: pq.ParquetWriter
    values: tuple[tuple[str, str | None], ...]
    stats: FileStats

    def add(self, table: pa.Table) -> None:
        self.writer.write_table(table)
        self.stats.add(table)


def write_files(
    batches: Iterable[pa.RecordBatch],
    root: str,
    partition_by: Sequence[str],
    storage_options: Mapping[str, str],
    *,
    prefix: str = "part",
    compression: str = "snappy",
) -> list[dict[str, Any]]:
    """Write ``batches`` under ``root`` (one file per partition value seen) and describe each file.

    ``compression`` is the Parquet codec (pyarrow's name, ``dal.formats.base.COMPRESSIONS``), also in the
    file names as Spark names them (``….zstd.parquet``). Partition columns are not stored in the files (Delta convention); each returned dict has the
    log-encoded relative ``path``, ``size``, ``partition_values`` (JSON), ``num_records`` and ``stats``.
    """
    fs, root_path = uris.filesystem(root, storage_options)
    open_files: dict[tuple[tuple[str, str | None], ...], _OpenFile] = {}
    token = uuid.uuid4().hex

    def target(values: tuple[tuple[str, str | None], ...], schema: pa.Schema) -> _OpenFile:
        if values not in open_files:
            directory = partition_dir(values)
            suffix = "" if compression == "none" else f".{compression}"
            name = f"{prefix}-{len(open_files):05d}-{token}{suffix}.parquet"
            relpath = f"{directory}/{name}" if directory else name
            full = uris.join(root_path, *relpath.split("/"))
            if uris.is_local(root):  # object stores have no directories (pyarrow would ask for the bucket first)
                fs.create_dir(full.rsplit("/", 1)[0], recursive=True)
            writer = pq.ParquetWriter(full, schema, filesystem=fs, compression=compression)
            open_files[values] = _OpenFile(relpath, writer, values, FileStats(schema))
        return open_files[values]

    for batch in batches:
        if batch.num_rows == 0:
            continue
        table = pa.Table.from_batches([batch])
        for values, part in split_by_partition(table, partition_by):
            data = part.drop_columns(list(partition_by))
            target(blank_as_null(values), data.schema).add(data)  # '' where nulls go, as delta-rs reads it

    out = []
    for f in open_files.values():
        f.writer.close()
        info = fs.get_file_info(uris.join(root_path, *f.relpath.split("/")))
        out.append(
            {
                "path": f.relpath,  # delta-rs URL-encodes it in the log itself
                "size": int(info.size or 0),
                "partition_values": json.dumps(dict(f.values)),
                "num_records": f.stats.rows,
                "stats": f.stats.to_json(),
                "modification_time": int(time.time() * 1000),
            }
        )
    return out


FILE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("partition_values", pa.string()),
        ("num_records", pa.int64()),
        ("stats", pa.string()),
        ("modification_time", pa.int64()),
    ]
)
