"""gc of a Delta table: which data files, deletion vectors, change data and log entries no kept version needs
(``DeltaFormat.garbage``), and the checkpoint written before log entries go (``DeltaFormat.prepare_gc``)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow.fs as pafs

from dal.catalog.types import VersionInfo
from dal.errors import DalError, FormatError
from dal.formats.base import (
    Format,
    Retention,
)
from dal.formats.delta.log import _actions, _short, deletion_vector_path, open_table
from dal.formats.directory import aged_files
from dal.storage import ownership, uris
from dal.storage.location import Location

log_gc = logging.getLogger("dal.gc")
# log entries of one version: commit, checksum, checkpoint (classic, multi-part, v2 top-level), Hadoop .crc
_LOG_ENTRY = re.compile(
    r"\.?(\d{20})\.(?:json|crc|checkpoint(?:\.\d+\.\d+|\.[0-9a-fA-F-]{36})?\.(?:parquet|json))(?:\.crc)?"
)
_COMPACTED = re.compile(r"\.?\d{20}\.(\d{20})\.compacted\.json(?:\.crc)?")  # a range: its last version counts
_CLASSIC_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet")
_DV_FILE = re.compile(r"deletion_vector_[0-9a-fA-F-]{36}\.bin")
_RETENTION = re.compile(r"\s*interval\s+(\d+)\s+(\w+?)s?\s*", re.IGNORECASE)
_UNIT_S = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1, "minute": 60, "hour": 3600,
           "day": 86400, "week": 604800}  # fmt: skip
LOG_RETENTION_DEFAULT_S = 30 * 86400.0  # Delta's default delta.logRetentionDuration


def _log_version(rel: str) -> int | None:
    """The version a log entry (``_delta_log/<name>``, not in a subdirectory) belongs to; None for anything
    else (``_last_checkpoint``, sidecars, staged commits)."""
    parts = rel.split("/")
    if len(parts) != 2 or parts[0] != "_delta_log":
        return None
    if m := _LOG_ENTRY.fullmatch(parts[1]):
        return int(m.group(1))
    if m := _COMPACTED.fullmatch(parts[1]):
        return int(m.group(1))
    return None


def _checkpoints(names: Iterable[str]) -> set[int]:
    """Versions with a complete-looking checkpoint among the log's file names (classic, multi-part, v2)."""
    out = set()
    for n in names:
        if n.startswith(".") or ".checkpoint." not in n or not n.endswith((".parquet", ".json")):
            continue
        if (m := _LOG_ENTRY.fullmatch(n)) is not None and not n.endswith(".crc"):
            out.add(int(m.group(1)))
    return out


def log_retention_s(configuration: Mapping[str, str]) -> float | None:
    """The table's ``delta.logRetentionDuration`` in seconds (Delta's default 30 days when unset); None
    when it cannot be read (then no log entry is deleted)."""
    text = configuration.get("delta.logRetentionDuration")
    if text is None:
        return LOG_RETENTION_DEFAULT_S
    m = _RETENTION.fullmatch(text)
    unit = _UNIT_S.get(m.group(2).lower()) if m else None
    return None if m is None or unit is None else int(m.group(1)) * unit


def _expired_log(table: Any, listed: Sequence[tuple[str, int, float]], kept: Sequence[int]) -> list[tuple[str, int]]:
    """Log entries of versions before the oldest kept one, older than the table's log retention."""
    if not kept:
        return []
    retention = log_retention_s(table.metadata().configuration or {})
    if retention is None:
        log_gc.warning("%s: unreadable delta.logRetentionDuration; no log entry is expired", table.table_uri)
        return []
    oldest = min(kept)
    return [
        (rel, size)
        for rel, size, age in listed
        if (v := _log_version(rel)) is not None and v < oldest and age >= retention
    ]


_COMMIT = re.compile(r"\d{20}\.json")
_V2_CHECKPOINT = re.compile(r"\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)")


def _sidecars_named(fs: pafs.FileSystem, path: str) -> set[str] | None:
    """The sidecar files a v2 checkpoint names (file names in ``_delta_log/_sidecars``); None when it cannot
    be read or names one elsewhere (then no sidecar is judged unreferenced)."""
    try:
        if path.endswith(".json"):
            found = [a["sidecar"].get("path") for a in _actions(fs, path) if isinstance(a.get("sidecar"), dict)]
        else:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path, filesystem=fs)
            if "sidecar" not in pf.schema_arrow.names:
                return set()
            found = [a["path"] for a in pf.read(columns=["sidecar"]).column("sidecar").to_pylist() if a]
    except Exception as e:  # an unreadable checkpoint: keep every sidecar
        log_gc.warning("%s: cannot read its sidecar list (%s); no sidecar file is deleted", path, _short(e))
        return None
    names = {unquote(str(p)) for p in found}
    return None if any(not n or "/" in n for n in names) else names


def _orphaned_sidecars(
    location: str, storage_options: Mapping[str, str], listed: Sequence[tuple[str, int, float]], doomed: set[str]
) -> list[tuple[str, int]]:
    """Sidecar files (``_delta_log/_sidecars/``) of v2 checkpoints gc deletes that no remaining checkpoint
    names: they are part of the deleted checkpoint (Delta's metadata cleanup removes them too)."""
    checkpoints = [rel for rel, _s, _a in listed if rel.count("/") == 1 and _V2_CHECKPOINT.fullmatch(rel[11:])]
    going = [rel for rel in checkpoints if rel in doomed]
    if not going:
        return []
    fs, root = uris.filesystem(location, storage_options)
    named: dict[str, set[str] | None] = {rel: _sidecars_named(fs, uris.join(root, rel)) for rel in checkpoints}
    if any(v is None for v in named.values()):
        return []
    remaining = set().union(*(named[rel] or set() for rel in checkpoints if rel not in doomed))
    candidates = set().union(*(named[rel] or set() for rel in going)) - remaining
    return [
        (rel, size) for rel, size, _a in listed if rel.startswith("_delta_log/_sidecars/") and rel[21:] in candidates
    ]


_HIDDEN_CRC = re.compile(r"\.(.+)\.crc")


@dataclass
class _ChangeFeed:
    """What the change data feed of the kept versions needs, from the commits in the log: ``kept`` change data
    files (``cdc`` actions of commits from the oldest kept version on), ``old`` ones (named by older
    commits), ``gone`` ones (named by the commits of versions expiring now), and the data files kept commits
    without ``cdc`` actions remove (their deletes are read from those files: ``removed_kept``; those of
    expiring commits: ``removed_gone``). ``complete``: every commit from the oldest kept version on is in
    the log (else a change data file no commit names is not judged untracked)."""

    kept: set[str] = field(default_factory=set)
    old: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    removed_kept: set[str] = field(default_factory=set)
    removed_gone: set[str] = field(default_factory=set)
    complete: bool = False

    def doomed(self, rel: str, age: float, retention: Retention) -> bool:
        """A change data file (``_change_data/...``) gc deletes: named only by commits before the oldest kept
        version and expiring now (or abandoned by ``retention``), or named by no commit and abandoned."""
        if not rel.startswith("_change_data/") or rel in self.kept or _HIDDEN_CRC.fullmatch(rel.rsplit("/", 1)[-1]):
            return False
        if rel in self.gone:
            return True
        if rel in self.old:
            return retention.abandoned(rel, age)
        return self.complete and retention.abandoned(rel, age)


def _change_feed(
    location: str,
    storage_options: Mapping[str, str],
    listed: Sequence[tuple[str, int, float]],
    kept: Sequence[int],
    expiring: Sequence[int],
    cdf_on: bool,
) -> _ChangeFeed:
    """The change data files (and, with the change data feed on, the removed data files) each commit in the
    log names, split by the oldest kept version (Delta's vacuum removes the change data of expired versions)."""
    feed = _ChangeFeed()
    has_cdc = any(rel.startswith("_change_data/") for rel, _s, _a in listed)
    if not kept or not (has_cdc or cdf_on):
        return feed
    fs, root = uris.filesystem(location, storage_options)
    commits = {int(rel[11:31]): rel for rel, _s, _a in listed if rel.count("/") == 1 and _COMMIT.fullmatch(rel[11:])}
    oldest, gone = min(kept), set(expiring)
    feed.complete = all(v in commits for v in range(oldest, max([*commits, oldest]) + 1))

    def rel_of(path: str) -> str | None:
        return ownership.inside(location, path)  # outside the root: never the table's

    for v, rel in sorted(commits.items()):
        if v < oldest and not has_cdc and v not in gone:
            continue
        try:
            actions = list(_actions(fs, uris.join(root, rel)))
        except Exception as e:  # an unreadable commit: its change data files stay
            log_gc.warning(
                "%s: cannot read %s (%s); no untracked change data file is deleted", location, rel, _short(e)
            )
            feed.complete = False
            continue
        _add_commit(feed, actions, v >= oldest, v in gone, cdf_on, rel_of)
    feed.old -= feed.kept
    feed.gone -= feed.kept
    return feed


def _add_commit(
    feed: _ChangeFeed,
    actions: Sequence[Mapping[str, Any]],
    kept: bool,
    gone: bool,
    cdf_on: bool,
    rel_of: Callable[[str], str | None],
) -> None:
    """One commit's change data files into ``feed`` (by whether its version is ``kept``, expiring — ``gone`` — or
    older), and with the change data feed on, the data files it removed when it wrote no change data."""
    cdc = {r for a in actions if isinstance(a.get("cdc"), dict) and (r := rel_of(a["cdc"]["path"]))}
    (feed.kept if kept else feed.gone if gone else feed.old).update(cdc)
    if cdf_on and not cdc:
        removed = {
            r
            for a in actions
            if isinstance(a.get("remove"), dict) and a["remove"].get("dataChange", True)
            and (r := rel_of(a["remove"]["path"]))
        }  # fmt: skip
        if kept:
            feed.removed_kept |= removed
        elif gone:
            feed.removed_gone |= removed


def _deletion_vector_files(
    dataset: str,
    location: str,
    storage_options: Mapping[str, str],
    kept: Sequence[int],
    expiring: Sequence[int],
    listed: Sequence[tuple[str, int, float]],
) -> tuple[set[str], set[str]]:
    """(deletion vector files the kept versions need, every one a replayed or expiring commit adds), both
    relative to the location, from a replay of the log (add/remove actions) from the newest classic
    checkpoint not after the oldest kept version (or from version 0) up to the newest kept one, and the
    commits of the ``expiring`` versions still in the log. delta-rs does not expose deletion vector paths,
    and its vacuum leaves them be.

    Raises:
        DalError: the table has deletion vector files but the log cannot be replayed (nothing is deleted)."""
    if not kept or not any(_DV_FILE.fullmatch(rel.rsplit("/", 1)[-1]) for rel, _s, _a in listed):
        return set(), set()
    return _replayed(dataset, location, storage_options, _log_names(listed), kept, expiring)


def missing_deletion_vectors(location: str, storage_options: Mapping[str, str], version: int) -> list[str]:
    """The deletion vector files Delta version ``version`` reads that are not there, sorted, relative to the
    location ([] when the log cannot tell: no checkpoint before a commit gone from it). What delta-rs names
    instead is whichever missing file its parallel reads meet first."""
    fs, root = uris.filesystem(location, storage_options)
    try:
        infos = fs.get_file_info(pafs.FileSelector(uris.join(root, "_delta_log")))
        needed, _named = _replayed(location, location, storage_options, {i.base_name for i in infos}, [version], [])
    except (DalError, OSError, ValueError):
        return []
    wanted = sorted(needed)
    there = fs.get_file_info([uris.join(root, rel) for rel in wanted])
    return [rel for rel, info in zip(wanted, there, strict=True) if info.type == pafs.FileType.NotFound]


def _replayed(
    dataset: str, location: str, storage_options: Mapping[str, str], names: set[str], kept: Sequence[int],
    expiring: Sequence[int],
) -> tuple[set[str], set[str]]:  # fmt: skip
    """``_deletion_vector_files`` from the log's file names (``names``): the replay itself.

    Raises:
        DalError: a commit the replay needs is gone and no checkpoint precedes it."""
    oldest, newest = kept[0], kept[-1]
    first = max(_classic_checkpoints(names, lambda v: v <= oldest), default=None)
    commits = range(first + 1 if first is not None else 0, newest + 1)
    missing = [v for v in commits if f"{v:020d}.json" not in names]
    if missing:
        raise DalError(
            f"{dataset}: cannot tell which deletion vector files kept versions need (no checkpoint at or before "
            f"version {oldest}, and commit {missing[0]} is not in the log); nothing was deleted"
        )
    fs, root = uris.filesystem(location, storage_options)
    replay = _DeletionVectorReplay(location, fs, uris.join(root, "_delta_log"))
    if first is not None:
        replay.checkpoint(_checkpoint_parts(names, first))
        if first in kept:
            replay.keep()
    for v in commits:
        replay.commit(v)
        if v in kept:
            replay.keep()
    for v in expiring:  # a deletion vector file is written for the commit that adds it
        if v not in commits and f"{v:020d}.json" in names:
            replay.added_by(v)
    return replay.needed, replay.named


def _log_names(listed: Sequence[tuple[str, int, float]]) -> set[str]:
    """The file names directly in ``_delta_log/`` among the listed files."""
    return {rel.split("/", 1)[1] for rel, _s, _a in listed if rel.startswith("_delta_log/") and rel.count("/") == 1}


def _classic_checkpoints(names: Iterable[str], which: Callable[[int], bool]) -> set[int]:
    """The versions of the classic (or multi-part) checkpoints among ``names`` for which ``which`` holds."""
    return {v for n in names if (m := _CLASSIC_CHECKPOINT.fullmatch(n)) and which(v := int(m.group(1)))}


def _checkpoint_parts(names: Iterable[str], version: int) -> list[str]:
    """The file names of the classic checkpoint of ``version`` (its parts, in order)."""
    return sorted(n for n in names if (m := _CLASSIC_CHECKPOINT.fullmatch(n)) and int(m.group(1)) == version)


@dataclass
class _DeletionVectorReplay:
    """The state of a replay of the log for ``_deletion_vector_files``: the deletion vector of every data file
    added and not removed yet (``state``), every deletion vector file an action names (``named``), and those
    the versions kept so far need (``needed``); all relative to the location."""

    location: str
    fs: pafs.FileSystem
    log: str
    state: dict[str, str | None] = field(default_factory=dict)
    named: set[str] = field(default_factory=set)
    needed: set[str] = field(default_factory=set)

    def rel_of(self, dv: Mapping[str, Any] | None) -> str | None:
        path = deletion_vector_path(dv) if dv else None
        return None if path is None else ownership.inside(self.location, path)  # outside the root: never the table's

    def checkpoint(self, parts: Sequence[str]) -> None:
        """The add actions of a classic checkpoint (its parts' file names in the log)."""
        import pyarrow.parquet as pq

        for n in parts:
            adds = pq.read_table(uris.join(self.log, n), filesystem=self.fs, columns=["add"]).column("add").to_pylist()
            for a in adds:
                if a is not None and (rel := ownership.inside(self.location, a["path"])) is not None:
                    self.state[rel] = dv = self.rel_of(a.get("deletionVector"))
                    if dv:
                        self.named.add(dv)

    def commit(self, v: int) -> None:
        """One commit's remove, then add actions (a commit replacing a file's deletion vector removes the old one
        first)."""
        actions = list(_actions(self.fs, uris.join(self.log, f"{v:020d}.json")))
        for kind in ("remove", "add"):
            for act in actions:
                a = act.get(kind)
                if a is not None:
                    self._apply(kind, a)

    def _apply(self, kind: str, a: Mapping[str, Any]) -> None:
        path, dv = ownership.inside(self.location, a["path"]), self.rel_of(a.get("deletionVector"))
        if dv:
            self.named.add(dv)
        if path is None:
            return  # outside the root: reads refuse such a version, gc never counts it as the table's
        if kind == "add":
            self.state[path] = dv
        elif path in self.state and self.state[path] == dv:
            del self.state[path]

    def keep(self) -> None:
        """The version replayed so far is kept: every deletion vector it reads is needed."""
        self.needed |= {dv for dv in self.state.values() if dv}

    def added_by(self, v: int) -> None:
        """The deletion vector files commit ``v`` adds (not replayed: a version expiring now)."""
        self.named |= {
            dv
            for act in _actions(self.fs, uris.join(self.log, f"{v:020d}.json"))
            if (dv := self.rel_of((act.get("add") or {}).get("deletionVector")))
        }


def _below(loc: Location, uri: str) -> str | None:
    """``uri`` relative to the location, or None when it lies outside (never deleted: gc lists inside only)."""
    root = os.path.join(loc.uri, "") if loc.local else loc.uri.rstrip("/") + "/"
    if not uri.startswith(root):
        return None
    return uri[len(root) :].replace(os.sep, "/")


def garbage(
    fmt: Format,
    dataset: str,
    location: str,
    storage_options: Mapping[str, str],
    expiring: Sequence[VersionInfo],
    kept: Sequence[VersionInfo],
    retention: Retention,
) -> list[tuple[str, int]]:
    """Data files and deletion vectors no kept version needs (delta-rs's vacuum, as dal applies it: the
    files of expiring versions now, unreferenced ones once ``retention`` calls them abandoned: no write in
    flight claims them and they are ``safe_age`` old), and log entries (commits,
    checksums, checkpoints) of versions before the oldest kept one that are older than the table's
    ``delta.logRetentionDuration`` (30 days unless the table sets it: delta-rs's ``cleanup_metadata``
    rule). ``prepare_gc`` writes a checkpoint at the oldest kept version first when the log needs one,
    so every kept version stays loadable without the entries that go."""
    loc = Location.of(location, storage_options)
    needed = _kept_files(fmt, dataset, location, storage_options, kept)
    expired_files = _expiring_files(fmt, location, storage_options, expiring)
    listed = aged_files(loc, fmt.table_roots)
    kept_versions = sorted({v.storage_version for v in kept if v.storage_version is not None})
    gone_versions = sorted({v.storage_version for v in expiring if v.storage_version is not None})
    dv_needed, dv_committed = _deletion_vector_files(
        dataset, location, storage_options, kept_versions, gone_versions, listed
    )
    needed |= dv_needed
    _check_found(dataset, loc, needed, listed)
    table = open_table(location, storage_options)
    feed = _change_feed(location, storage_options, listed, kept_versions, gone_versions, _change_data_feed_on(table))
    out = _expired_log(table, listed, kept_versions)
    out += _orphaned_sidecars(location, storage_options, listed, {rel for rel, _s in out})
    out += _unneeded(listed, needed, expired_files | feed.removed_gone, dv_committed, feed, retention)
    return sorted(out)


def _check_found(dataset: str, loc: Location, needed: set[str], listed: Sequence[tuple[str, int, float]]) -> None:
    """Refuse (``DalError``, nothing deleted) when a file a kept version needs is not in the listing: a kept
    file not found by its name; gc never guesses which listed file it is."""
    unmatched = sorted(needed - {rel for rel, _s, _a in listed})
    if unmatched:
        raise DalError(
            f"{dataset}: kept versions reference {len(unmatched)} file(s) gc cannot find at {loc.uri} "
            f"(e.g. {unmatched[0]}); nothing was deleted"
        )


def _change_data_feed_on(table: Any) -> bool:
    return str((table.metadata().configuration or {}).get("delta.enableChangeDataFeed", "")).lower() == "true"


def _unneeded(
    listed: Sequence[tuple[str, int, float]],
    needed: set[str],
    expired: set[str],
    dv_committed: set[str],
    feed: _ChangeFeed,
    retention: Retention,
) -> list[tuple[str, int]]:
    """The listed files gc deletes besides log entries: change data files and their checksums the feed no
    longer needs, deletion vectors and data files no kept version needs that an ``expired`` version (or a
    committed deletion vector) names or ``retention`` calls abandoned."""
    out: list[tuple[str, int]] = []
    going_cdc = {rel for rel, _s, age in listed if feed.doomed(rel, age, retention)}
    present = {rel for rel, _s, _a in listed}
    for rel, size, age in listed:
        parts = rel.split("/")
        if parts[0] == "_change_data":  # change data files (cdc actions) and their Hadoop checksums
            goes = _change_data_goes(parts, age, present, going_cdc, feed, retention)
        elif rel in feed.removed_kept:
            goes = False  # a kept commit's change feed reads it (its deletes, without cdc files)
        elif _DV_FILE.fullmatch(parts[-1]) and parts[0] != "_delta_log":
            goes = rel not in needed and (rel in dv_committed or retention.abandoned(rel, age))
        else:
            goes = _is_data_file(parts) and rel not in needed and (rel in expired or retention.abandoned(rel, age))
        if goes:
            out.append((rel, size))
    return out


def _kept_files(
    fmt: Format, dataset: str, location: str, storage_options: Mapping[str, str], kept: Sequence[VersionInfo]
) -> set[str]:
    """The data files the kept versions read, relative to the location.

    Raises:
        DalError: a kept version's files cannot be listed (nothing is deleted)."""
    loc = Location.of(location, storage_options)
    needed: set[str] = set()
    for v in kept:
        try:
            files = fmt.files(location, v, storage_options)
        except DalError as e:
            raise DalError(
                f"{dataset}: cannot tell which files kept version {v.number} needs ({e}); nothing was deleted"
            ) from e
        needed |= {r for f in files if (r := _below(loc, f.uri)) is not None}
    return needed


def _expiring_files(
    fmt: Format, location: str, storage_options: Mapping[str, str], expiring: Sequence[VersionInfo]
) -> set[str]:
    """The data files the expiring versions read, relative to the location (an unreadable one's are judged by
    age like any unreferenced file)."""
    loc = Location.of(location, storage_options)
    out: set[str] = set()
    for v in expiring:
        try:
            out |= {r for f in fmt.files(location, v, storage_options) if (r := _below(loc, f.uri)) is not None}
        except DalError:
            continue  # unreadable already: its files are judged by age like any unreferenced file
    return out


def _change_data_goes(
    parts: Sequence[str],
    age: float,
    present: set[str],
    going: set[str],
    feed: _ChangeFeed,
    retention: Retention,
) -> bool:
    """Whether gc deletes a file under ``_change_data/`` (split into ``parts``): a change data file when
    ``going`` holds it, a Hadoop checksum (``.<name>.crc``) with its file, or when its file is gone, as that
    file would be."""
    rel = "/".join(parts)
    crc = _HIDDEN_CRC.fullmatch(parts[-1])
    twin = "/".join([*parts[:-1], crc.group(1)]) if crc else None
    if twin is not None and twin in present:  # a checksum goes with its file
        return twin in going
    return rel in going or (twin is not None and feed.doomed(twin, age, retention))


def _is_data_file(parts: Sequence[str]) -> bool:
    """A Parquet data file: not the log, and not hidden (delta-rs vacuum skips those too)."""
    return (
        parts[0] != "_delta_log" and parts[-1].endswith(".parquet") and not any(p.startswith(("_", ".")) for p in parts)
    )


def prepare_gc(
    location: str, storage_options: Mapping[str, str], kept: Sequence[VersionInfo], doomed: Sequence[str]
) -> None:
    """Before gc deletes log entries: a checkpoint at the oldest kept version unless one newer than every
    doomed entry (and not newer than that version) exists, written by delta-rs, so kept versions load."""
    gone = [v for rel in doomed if (v := _log_version(rel)) is not None]
    kept_versions = [v.storage_version for v in kept if v.storage_version is not None]
    if not gone or not kept_versions:
        return
    oldest = min(kept_versions)
    fs, root = uris.filesystem(location, storage_options)
    log = uris.join(root, "_delta_log")
    names = [i.base_name for i in fs.get_file_info(pafs.FileSelector(log, allow_not_found=True))]
    if any(max(gone) < c <= oldest for c in _checkpoints(names)):
        return
    try:
        open_table(location, storage_options, oldest).create_checkpoint()
    except DalError:
        raise
    except Exception as e:
        raise FormatError(f"{location}: cannot write a checkpoint at Delta version {oldest}: {_short(e)}") from e
    log_gc.debug("%s: wrote a checkpoint at Delta version %d before expiring older log entries", location, oldest)
