"""What changed between two catalog versions of a Petastorm dataset dal writes (``dal.formats.changes``).

Each Petastorm version is a complete directory named by its record (``_dal_versions/<n>.json``): an append
copies the previous version's files under the same paths (a schema merge rewrites them with the new fields
null) and adds its own; an overwrite (a write, or ``dal optimize``'s compaction) holds only new files. So the
changes of catalog version ``w`` are found by comparing its record with the previous recorded version's:

- an append: the files whose paths the previous version lacks are inserts, one file each, no extra reads (the
  carried ones hold the same rows; widened by a merge, they are the same rows projected onto the new schema);
- an overwrite: a ``DiffUnit`` of the previous files against the new ones, per partition both hold (whose
  rows on both sides cancel: a compaction therefore reports nothing, after reading both sides), and whole-file
  deletes or inserts for a partition only one side holds;
- the first version of a dataset (``since`` None): every row an insert.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from dal.catalog.types import VersionInfo
from dal.errors import ChangesUnavailable, FormatError
from dal.formats.changes import INSERT, ChangeFile, ChangePlan, DiffUnit, FileChanges, Unit, by_partition, check_range
from dal.formats.directory import partition_values
from dal.formats.petastorm.records import Commit, read_commit
from dal.storage.location import Location
from dal.tensors.schema import TensorSchema


def plan_changes(
    dataset: str,
    location: str,
    storage_options: Mapping[str, str],
    versions: Sequence[VersionInfo],
    since: VersionInfo | None,
) -> ChangePlan:
    """The changes of the catalog versions ``versions`` (oldest first, every recorded version after ``since``)
    of the Petastorm dataset dal wrote at ``location``.

    Raises:
        ChangesUnavailable: a version of the range (or ``since``, when the first version overwrote it) is
            unavailable or has no record (a dataset petastorm wrote and dal adopted).
    """
    check_range(dataset, versions, since)
    loc = Location.of(location, storage_options)

    def record(v: VersionInfo) -> Commit:
        assert v.storage_version is not None
        try:
            return read_commit(loc, v.storage_version)
        except FormatError as e:
            raise ChangesUnavailable(f"{dataset} version {v.number}: its Petastorm record cannot be read ({e})") from e

    if since is not None and since.unavailable:
        raise ChangesUnavailable(
            f"{dataset}: version {since.number} cannot be read any more ({since.unavailable}), so what version "
            f"{versions[0].number} changed cannot be told; read changes since version {versions[0].number} or later"
        )
    previous = record(since) if since is not None else None
    newest = versions[-1]
    schema = TensorSchema.from_catalog("schema", newest.schema).arrow_schema()
    units: list[Unit] = []
    for v in versions:
        current = record(v)
        stamp = v.created_at if v.created_at.tzinfo is not None else v.created_at.replace(tzinfo=UTC)
        for unit in _version_units(previous, current, v.number, stamp):
            units += by_partition(unit, schema) if isinstance(unit, DiffUnit) else [unit]
        previous = current
    return ChangePlan(dataset, location, None if since is None else since.number, newest.number, schema, None,
                      tuple(units))  # fmt: skip


def _files(record: Commit, skip: set[str] | frozenset[str] = frozenset()) -> list[ChangeFile]:
    """The files of ``record`` (paths below the location) but those whose paths in its directory are in ``skip``."""
    return [
        ChangeFile(f"{record.directory}/{f.path}", f.size, partition_values(f.path))
        for f in record.files
        if f.path not in skip
    ]


def _version_units(previous: Commit | None, current: Commit, version: int, stamp: datetime) -> list[Unit]:
    """The units of one version against the one before it (None: the dataset's first version)."""
    if previous is None or current.mode == "append":
        held = {f.path for f in previous.files} if previous is not None else set()
        return [FileChanges(version, stamp, f, INSERT) for f in _files(current, held)]
    return [DiffUnit(version, stamp, tuple(_files(previous)), tuple(_files(current)))]


__all__ = ["plan_changes"]
