"""What changed between two catalog versions of a Delta table, planned from its commits (``dal.formats.changes``).

The catalog records one version per Delta commit it saw; catalog version ``w`` covers the Delta commits after
the previous recorded version's Delta version, up to and including its own (``VersionInfo.storage_version``).
So a catalog version that spans several Delta commits (commits ``sync`` recorded together are still one each;
a gap appears only when versions were recorded from another log) reports the changes of each of them, in order,
all labelled with its number and time; a Delta commit after the range's newest version belongs to no version of
the range and is not read. Each Delta commit, as the Delta protocol says for change data:

- with ``cdc`` actions (the table has a change data feed): its changes are exactly its ``_change_data``
  files, whose rows carry ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
  ``update_postimage``); its add and remove actions are not read;
- otherwise its add and remove actions with ``dataChange=true`` (an optimize's are ``false``: nothing):
  adds alone are inserts and removes alone deletes, one file each, no extra reads; a file re-added with a
  bigger deletion vector is the rows the new vector removes (deletes); removes and adds together (a
  copy-on-write delete, update or predicate overwrite, a full overwrite) are one ``DiffUnit`` per partition
  both sides hold (``dal.formats.changes.by_partition``), whose rows on both sides cancel, and whole-file
  deletes or inserts for a partition only one side holds;
- commits that add and remove nothing (metadata, properties, protocol) contribute nothing.

A commit the log no longer holds (its JSON cleaned after a checkpoint) cannot say what it changed:
``ChangesUnavailable``, never a partial answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from dal.catalog.types import VersionInfo
from dal.errors import ChangesUnavailable, FormatError
from dal.formats.changes import (
    DELETE,
    INSERT,
    ChangeFile,
    ChangePlan,
    DiffUnit,
    FileChanges,
    Unit,
    by_partition,
    check_range,
    refuse_gone_since,
)
from dal.formats.delta.log import (
    _arrow_schema,
    _check_paths,
    _commit_actions,
    _deleted_rows,
    _short,
    add_actions,
    open_table,
)
from dal.formats.delta.types import COLUMN_MAPPING_KEY, physical_schema
from dal.storage import ownership, uris


class _Snapshots:
    """delta-rs tables at the Delta versions a plan needs deletion vectors or partition values of, loaded once."""

    def __init__(self, location: str, storage_options: Mapping[str, str], dataset: str) -> None:
        self.location, self.storage_options, self.dataset = location, storage_options, dataset
        self._deleted: dict[int, dict[str, tuple[int, ...]]] = {}
        self._parts: dict[int, dict[str, dict[str, str | None]]] = {}

    def _table(self, version: int) -> Any:
        try:
            return open_table(self.location, self.storage_options, version)
        except FormatError as e:
            raise ChangesUnavailable(
                f"{self.dataset}: Delta version {version} cannot be loaded to tell what the next commit changed ({e})"
            ) from e

    def deleted(self, version: int) -> dict[str, tuple[int, ...]]:
        """Deleted positions per file (path below the table) of the files of Delta version ``version``."""
        if version not in self._deleted:
            table = self._table(version)
            has_dvs = "deletionVectors" in (table.protocol().reader_features or [])
            self._deleted[version] = _deleted_rows(table) if has_dvs else {}
        return self._deleted[version]

    def partition_values(self, version: int) -> dict[str, dict[str, str | None]]:
        """Partition values (logical column -> the value as text) per file of Delta version ``version``."""
        if version not in self._parts:
            table = self._table(version)
            parts = list(table.metadata().partition_columns)
            rows = add_actions(table).to_pylist()
            self._parts[version] = {
                str(r["path"]): {c: None if r[f"partition.{c}"] is None else str(r[f"partition.{c}"]) for c in parts}
                for r in rows
            }
        return self._parts[version]


def plan_changes(
    dataset: str,
    location: str,
    storage_options: Mapping[str, str],
    versions: Sequence[VersionInfo],
    since: VersionInfo | None,
) -> ChangePlan:
    """The changes of the catalog versions ``versions`` (oldest first: every recorded version after ``since``,
    up to the newest one asked about) of the Delta table at ``location``; ``since`` None: from the table's
    first commit.

    Raises:
        ChangesUnavailable: a version of the range is unavailable, a commit of the range is gone from the log,
            or ``since``'s files are gone and the first version removed some of them.
    """
    check_range(dataset, versions, since)
    if since is not None and since.storage_version is None:
        raise ChangesUnavailable(f"{dataset} version {since.number} pins no Delta version: its changes are unknown")
    newest = versions[-1]
    assert newest.storage_version is not None  # check_range
    try:
        schema = _arrow_schema(open_table(location, storage_options, newest.storage_version))
    except FormatError as e:
        raise ChangesUnavailable(f"{dataset} version {newest.number} cannot be loaded: {e}") from e
    mapped = any(f.metadata and COLUMN_MAPPING_KEY.encode() in f.metadata for f in schema)
    physical = physical_schema(schema) if mapped else None
    logical = {p.name: f.name for f, p in zip(schema, physical, strict=True)} if physical is not None else {}
    snapshots = _Snapshots(location, storage_options, dataset)
    units: list[Unit] = []
    previous = -1 if since is None else since.storage_version
    assert previous is not None
    for v in versions:
        assert v.storage_version is not None
        stamp = v.created_at if v.created_at.tzinfo is not None else v.created_at.replace(tzinfo=UTC)
        for commit in range(previous + 1, v.storage_version + 1):
            actions = _commit_actions(location, commit, storage_options)
            if not actions:
                raise ChangesUnavailable(
                    f"{dataset} version {v.number}: the Delta log no longer holds commit {commit} (cleaned after a "
                    "checkpoint), so what it changed cannot be told; read changes since a later version"
                )
            _check_paths(location, commit, actions)
            for unit in _commit_units(location, commit, actions, v.number, stamp, logical, snapshots):
                units += by_partition(unit, schema) if isinstance(unit, DiffUnit) else [unit]
        previous = v.storage_version
    refuse_gone_since(dataset, since, units, versions[0].number)
    return ChangePlan(dataset, location, None if since is None else since.number, newest.number, schema, physical,
                      tuple(units))  # fmt: skip


def _commit_units(
    location: str,
    commit: int,
    actions: Sequence[Mapping[str, Any]],
    version: int,
    stamp: datetime,
    logical: Mapping[str, str],
    snapshots: _Snapshots,
) -> list[Unit]:
    """The units of one Delta commit (see the module's notes)."""
    where = f"{uris.mask_url(location)} (Delta version {commit})"

    def rel(a: Mapping[str, Any], kind: str) -> str:
        return ownership.below(location, str(a["path"]), table=where, entry=f"a {kind} action's path")

    def values(a: Mapping[str, Any]) -> tuple[tuple[str, str | None], ...] | None:
        given = a.get("partitionValues")
        if not isinstance(given, dict):
            return None
        return tuple(sorted((logical.get(k, k), None if x is None else str(x)) for k, x in given.items()))

    cdc = [a["cdc"] for a in actions if isinstance(a.get("cdc"), dict)]
    if cdc:
        return [
            FileChanges(version, stamp, ChangeFile(rel(a, "cdc"), int(a.get("size") or 0), values(a) or ()), None)
            for a in cdc
        ]
    adds = [a["add"] for a in actions if isinstance(a.get("add"), dict) and a["add"].get("dataChange", True)]
    removes = [
        a["remove"] for a in actions if isinstance(a.get("remove"), dict) and a["remove"].get("dataChange", True)
    ]
    if not adds and not removes:
        return []
    added = [_file(a, rel(a, "add"), values(a), commit, snapshots) for a in adds]
    removed = [_file(a, rel(a, "remove"), values(a), commit - 1, snapshots) for a in removes]
    units: list[Unit] = []
    # a file re-added with a bigger deletion vector: the rows the new vector removes, read from the file alone
    again = {f.path: f for f in added}
    for old in list(removed):
        new = again.get(old.path)
        if new is None or not set(old.deleted) <= set(new.deleted) or new.only is not None:
            continue
        gone = tuple(sorted(set(new.deleted) - set(old.deleted)))
        removed.remove(old)
        added.remove(new)
        del again[old.path]
        if gone:
            units.append(FileChanges(version, stamp, ChangeFile(old.path, old.size_bytes, old.partition_values,
                                                                only=gone), DELETE))  # fmt: skip
    if removed and added:
        units.append(DiffUnit(version, stamp, tuple(removed), tuple(added)))
    else:
        units += [FileChanges(version, stamp, f, INSERT) for f in added]
        units += [FileChanges(version, stamp, f, DELETE) for f in removed]
    return units


def _file(
    action: Mapping[str, Any],
    path: str,
    values: tuple[tuple[str, str | None], ...] | None,
    snapshot: int,
    snapshots: _Snapshots,
) -> ChangeFile:
    """An add (``snapshot``: its commit) or remove (``snapshot``: the version before it) action's file, with the
    deletion vector it carries and its partition values (from the snapshot when the action lacks them)."""
    deleted: tuple[int, ...] = ()
    if isinstance(action.get("deletionVector"), dict):
        try:
            found = snapshots.deleted(snapshot)
        except ChangesUnavailable:
            raise
        except Exception as e:
            raise ChangesUnavailable(
                f"{snapshots.dataset}: the deletion vectors of Delta version {snapshot} cannot be read ({_short(e)})"
            ) from e
        if path not in found:
            raise ChangesUnavailable(
                f"{snapshots.dataset}: Delta version {snapshot} has no deletion vector for {path}, which its log names"
            )
        deleted = found[path]
    if values is None:
        known = snapshots.partition_values(snapshot)
        if path not in known:
            raise ChangesUnavailable(
                f"{snapshots.dataset}: the partition values of {path} (Delta version {snapshot}) are unknown"
            )
        values = tuple(sorted(known[path].items()))
    return ChangeFile(path, int(action.get("size") or 0), values, deleted)


__all__ = ["plan_changes"]
