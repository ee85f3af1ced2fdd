"""Directories of hive-partitioned Parquet files as formats describe them: listing the data files,
reading their footers, and the catalog's description of such a directory as one version."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from dal.catalog.types import Schema, VersionDraft
from dal.errors import FormatError
from dal.formats.footers import checked_rows
from dal.storage import ownership
from dal.storage.location import Location
from dal.storage.partitions import parse_partition_dir, partition_totals


@dataclass(frozen=True)
class FileEntry:
    """One Parquet file of a version directory: its path below the directory, bytes, rows, row groups."""

    path: str
    size: int
    rows: int
    row_groups: int


partition_values = parse_partition_dir  # of a file's path below the directory


def data_files(loc: Location, directory: str = "") -> list[tuple[str, int]]:
    """The Parquet files below ``directory`` as (relative path, size), sorted; '_' and '.' entries are not data."""
    return [
        (rel, size)
        for rel, size in sorted(loc.list(directory))
        if rel.endswith(".parquet") and not any(p.startswith(("_", ".")) for p in rel.split("/"))
    ]


def aged_files(loc: Location, roots: Sequence[str] = ()) -> list[tuple[str, int, float]]:
    """Every file below ``loc`` (hidden ones included) as (relative path, size, seconds since it was last
    modified; infinite when the store does not say), for retention: in one recursive listing that never
    follows a link (``dal.storage.ownership.listing``: a linked directory's files are not the table's)."""
    return [(f.rel, f.size, f.age) for f in ownership.listing(loc, roots).files]


def missing_files(loc: Location, rels: Sequence[str]) -> list[str]:
    """Those of ``rels`` (paths below ``loc``) that are not files there, in their order: one stat (a HEAD on
    object stores) each, 16 at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def gone(rel: str) -> bool:
        return bool(loc.fs.get_file_info(loc.path(rel)).type != pafs.FileType.File)

    if len(rels) <= 16:
        flags = [gone(r) for r in rels]
    else:
        with ThreadPoolExecutor(16) as pool:
            flags = list(pool.map(gone, rels))
    return [r for r, g in zip(rels, flags, strict=True) if g]


def vanished(loc: Location, missing: Sequence[str], total: int) -> FormatError:
    """The error of a commit whose staged files are gone: nothing was published."""
    return FormatError(
        f"{len(missing)} of the {total} file(s) this write staged at {loc.uri} are gone (e.g. {missing[0]}): deleted "
        "while the write ran (by a gc that did not know of it, or by hand); nothing was committed: write again"
    )


def scan_directory(loc: Location, directory: str = "") -> list[FileEntry]:
    """:func:`data_files` with rows and row groups from their footers: for datasets dal did not write,
    which have no version record."""
    out = []
    for rel, size in data_files(loc, directory):
        meta = pq.read_metadata(loc.path(f"{directory}/{rel}" if directory else rel), filesystem=loc.fs)
        rows = checked_rows(meta, loc.uri.rstrip("/") + "/" + (f"{directory}/{rel}" if directory else rel))
        out.append(FileEntry(rel, size, rows, meta.num_row_groups))
    return out


def describe_files(files: Sequence[FileEntry], schema: Schema, *, previous: Schema | None, number: int) -> VersionDraft:
    """A version draft for a directory's Parquet files: rows, sizes, hive partitions."""
    parts = [k for k, _ in partition_values(files[0].path)] if files else []
    operation = "create" if previous is None else ("schema-change" if previous != schema else "append")
    return VersionDraft(
        operation=operation,
        schema=schema,
        row_count=sum(f.rows for f in files),
        file_count=len(files),
        size_bytes=sum(f.size for f in files),
        storage_version=number,
        partition_columns=tuple(parts),
        partitions=partition_totals((partition_values(f.path), f.rows, f.size) for f in files) if parts else (),
    )
