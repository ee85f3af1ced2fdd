"""What changed between two versions of a dataset, as a plan of plain values (``Format.changes``).

A format answers "which rows did versions ``(since, this]`` insert and delete" without reading a row: it
returns a ``ChangePlan``, a frozen, picklable list of units in commit order, each labelled with the catalog
version that recorded it. ``dal.read.changes`` reads the rows.

- ``FileChanges``: one file whose live rows are all of one change type (an appended file: inserts; a file
  removed whole by a delete: deletes), or a Delta change-data file whose rows carry ``_change_type`` already.
  No extra reads.
- ``DiffUnit``: files removed and files added by the same commit where rows may survive unchanged (a
  copy-on-write rewrite, an overwrite, a deletion vector that grew): the changes are the multiset difference
  of the two sides' full rows (rows on both sides cancel), so an unchanged row is never reported.

Every row is projected onto the schema of the newest version of the range (``ChangePlan.schema``; columns a
file lacks are null), as pyiceberg and Iceberg Java do, and gets three columns: ``_change_type``,
``_commit_version`` (the catalog's version number) and ``_commit_timestamp`` (when that version was
committed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa

from dal.catalog.types import VersionInfo
from dal.errors import ChangesUnavailable
from dal.formats.fragments import partition_value

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
INSERT, DELETE = "insert", "delete"
UPDATE_PREIMAGE, UPDATE_POSTIMAGE = "update_preimage", "update_postimage"
CHANGE_TYPES = (INSERT, DELETE, UPDATE_PREIMAGE, UPDATE_POSTIMAGE)
# the columns a change read adds to every row, and their types
CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string(), nullable=False),
    pa.field(COMMIT_VERSION, pa.int64(), nullable=False),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC"), nullable=False),
)


@dataclass(frozen=True)
class ChangeFile:
    """One data file as a change read sees it: its path below the dataset's location, its partition values
    (column -> the value as the format spells it), and which of its rows are live: every row but ``deleted``
    (positions a deletion vector removes), or only the positions in ``only`` when that is set."""

    path: str
    size_bytes: int
    partition_values: tuple[tuple[str, str | None], ...] = ()
    deleted: tuple[int, ...] = ()
    only: tuple[int, ...] | None = None


@dataclass(frozen=True)
class FileChanges:
    """Every live row of ``file`` is one change of ``change_type`` (None: a change-data file whose rows carry
    their own ``_change_type``), recorded by catalog version ``version`` at ``timestamp``."""

    version: int
    timestamp: datetime
    file: ChangeFile
    change_type: str | None


@dataclass(frozen=True)
class DiffUnit:
    """One commit that removed ``removed`` and added ``added``: its deletes are the rows of ``removed`` that
    ``added`` does not hold, its inserts the rows of ``added`` that ``removed`` does not hold (multisets of full
    rows: a row held twice and kept once is one delete)."""

    version: int
    timestamp: datetime
    removed: tuple[ChangeFile, ...]
    added: tuple[ChangeFile, ...]


Unit = FileChanges | DiffUnit


@dataclass(frozen=True)
class ChangePlan:
    """The changes of versions ``(since, until]`` of ``dataset``: ``units`` in commit order, their rows read
    with ``schema`` (the newest version's, logical names) from the files below ``location``; ``physical``
    names each field of ``schema`` as the files do (column mapping; None: the logical names)."""

    dataset: str
    location: str
    since: int | None
    until: int
    schema: pa.Schema
    physical: pa.Schema | None
    units: tuple[Unit, ...]

    @property
    def output_schema(self) -> pa.Schema:
        """The schema of the rows a change read returns: ``schema`` and the three change columns."""
        return pa.schema([*self.schema, *CHANGE_FIELDS])

    @property
    def files_read(self) -> int:
        """How many files reading the plan opens."""
        return sum(1 if isinstance(u, FileChanges) else len(u.removed) + len(u.added) for u in self.units)


def check_range(dataset: str, versions: Sequence[VersionInfo], since: VersionInfo | None) -> None:
    """Refuse a range a change read cannot answer exactly, before anything is read: no versions, versions out
    of order or pinning no storage version, a version in the range whose data is gone (expired by ``dal gc``,
    vacuumed, log-expired), or a schema that already holds a change column's name.

    Raises:
        ChangesUnavailable: naming the version and why.
    """
    if not versions:
        raise ChangesUnavailable(f"{dataset}: no versions in the range to read changes of")
    previous = since
    for v in versions:
        older, newer = (None, None) if previous is None else (previous.storage_version, v.storage_version)
        if previous is not None and (
            v.number <= previous.number or (older is not None and newer is not None and older >= newer)
        ):
            raise ChangesUnavailable(f"{dataset}: versions {previous.number} and {v.number} are out of order")
        if v.storage_version is None:
            raise ChangesUnavailable(f"{dataset} version {v.number} pins no storage version: its changes are unknown")
        if v.unavailable:
            raise ChangesUnavailable(
                f"{dataset}: the changes of version {v.number} cannot be read: {v.unavailable}; read changes "
                "since a later version"
            )
        previous = v
    taken = [f.name for f in CHANGE_FIELDS if f.name in versions[-1].schema.names]
    if taken:
        raise ChangesUnavailable(
            f"{dataset} version {versions[-1].number} has column(s) named {', '.join(taken)}, which a change "
            "read adds to every row"
        )


def by_partition(unit: DiffUnit, schema: pa.Schema) -> list[Unit]:
    """``unit`` cut by partition: rows of different partitions never cancel, so each partition both sides hold
    is a ``DiffUnit`` of its own (less to hold at once, units read in parallel), and a partition only one side
    holds is its files' rows, whole (no other side read). Partition values compare as typed values (``schema``:
    the plan's), so two writers' spellings of one value meet. ``[unit]`` unchanged when its files are not all
    partitioned by the same columns, or a value does not parse.
    """
    files = (*unit.removed, *unit.added)
    columns = {tuple(sorted(k for k, _ in f.partition_values)) for f in files}
    if len(columns) != 1 or not next(iter(columns)):
        return [unit]
    keys = []
    for f in files:
        try:
            key = tuple((k, partition_value(v, schema.field(k).type).as_py()) for k, v in sorted(f.partition_values))
            hash(key)
        except (KeyError, TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return [unit]
        if any(isinstance(x, float) and x != x for _, x in key):  # NaN: never equal to itself
            return [unit]
        keys.append(key)
    groups: dict[tuple[object, ...], tuple[list[ChangeFile], list[ChangeFile]]] = {}
    for i, (f, key) in enumerate(zip(files, keys, strict=True)):
        groups.setdefault(key, ([], []))[0 if i < len(unit.removed) else 1].append(f)
    out: list[Unit] = []
    for removed, added in groups.values():
        if removed and added:
            out.append(DiffUnit(unit.version, unit.timestamp, tuple(removed), tuple(added)))
        else:
            out += [FileChanges(unit.version, unit.timestamp, f, DELETE) for f in removed]
            out += [FileChanges(unit.version, unit.timestamp, f, INSERT) for f in added]
    return out


def refuse_gone_since(dataset: str, since: VersionInfo | None, units: Sequence[Unit], first: int) -> None:
    """Refuse a plan whose first version (``first``) reads rows of files only ``since`` held, when ``since``'s
    files are gone (gc reclaimed them): its deletes could not be read.

    Raises:
        ChangesUnavailable: naming both versions.
    """
    if since is None or not since.unavailable:
        return
    for u in units:
        if u.version != first:
            continue
        reads_removed = isinstance(u, DiffUnit) or (u.change_type == DELETE)
        if reads_removed:
            raise ChangesUnavailable(
                f"{dataset}: version {first} removed rows of version {since.number}, which cannot be read any more "
                f"({since.unavailable}); its deletes are unknown: read changes since version {first} or later"
            )


__all__ = [
    "CHANGE_FIELDS",
    "CHANGE_TYPE",
    "CHANGE_TYPES",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "DELETE",
    "INSERT",
    "UPDATE_POSTIMAGE",
    "UPDATE_PREIMAGE",
    "ChangeFile",
    "ChangePlan",
    "DiffUnit",
    "FileChanges",
    "Unit",
    "by_partition",
    "check_range",
    "refuse_gone_since",
]
