"""Recording storage versions in the catalog, and the claim check every write, register, sync, gc, optimize and
purge makes before it touches storage.

``sync_dataset`` is ``dal.sync``'s body (``dal.api.sync`` checks the arguments), used by every write's recording
and by ``register``; ``not_recorded`` is the one ``CommittedNotRecorded`` a committed write that the catalog
could not record raises.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from dal import progress
from dal._testhooks import pause
from dal.catalog import CommittedNotRecorded, DatasetInfo, DatasetNotFound, VersionInfo
from dal.catalog.errors import LocationTaken
from dal.catalog.types import VersionDraft
from dal.errors import DalError, FormatError, translating
from dal.formats.base import WRITER_CATALOG, Format, Recorded
from dal.formats.registry import detect, get_format
from dal.storage import claims, timeparts, uris
from dal.storage.location import Location
from dal.storage.partitions import PARTITION_TYPES_KEY, declared_types

if TYPE_CHECKING:
    from dal.catalog import Catalog

_log = logging.getLogger("dal")


@translating("syncing {name}")
def sync(name: str, storage_options: Mapping[str, str], cat: Catalog) -> list[VersionInfo]:
    """``dal.sync`` of checked arguments (a write records its commit with it): adopts a first write's table at the
    default location that the catalog has not heard of.

    Raises:
        DatasetNotFound, DalError: as ``dal.sync``.
    """
    return sync_dataset(name, dict(storage_options), cat, adopt=True, registering=False)


def is_read_only(info: DatasetInfo | None) -> bool:
    """Whether the dataset was registered read-only in its catalog (``register(..., read_only=True)``)."""
    return info is not None and info.properties.get(claims.READ_ONLY) is True


def check_claim(
    cat: Catalog,
    name: str,
    fmt: Format,
    location: str,
    options: Mapping[str, str],
    action: claims.Action,
    *,
    recorded: bool,
    read_only: bool = False,
    take: bool = True,
) -> claims.Checked:
    """Refuse ``action`` on ``location`` unless this catalog owns it (claiming it when nobody does): see
    ``dal.storage.claims``. Formats dal never writes (plain Parquet) are never claimed: dal writes nothing there.
    Returns what the check found (the claim, whether it created it): callers never read the claim again.

    Raises:
        ClaimedElsewhere, ReadOnlyDataset, PurgeUnfinished, FormatError: as ``claims.check``.
    """
    if not fmt.writable:
        return claims.Checked(None)
    if recorded and action not in ("drop", "rename"):
        refuse_co_located(cat, name, location, action)
    holder = claims.Holder(cat.catalog_id, cat.display, name)
    loc = Location.of(location, options)
    return claims.check(loc, holder, action, recorded=recorded, read_only=read_only, take=take)


def refuse_co_located(cat: Catalog, name: str, location: str, action: str) -> None:
    """Refuse (``LocationTaken``) acting on a location another record of this catalog shares, holds or sits in
    (a catalog from before one location was one dataset's): each would write, gc and purge it as its own."""
    others = cat.co_located(name)
    if others:
        raise LocationTaken(
            f"{name}: {location} is also the location of (or overlaps) {', '.join(others[:3])}"
            f"{f' and {len(others) - 3} more' if len(others) > 3 else ''}; one location belongs to one dataset, so "
            f"dal will not {action} it: nothing was written or deleted. Drop the record that should not be there "
            "(`dal drop NAME`, without --purge: its data stays)"
        )


def first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def holder_of(cat: Catalog, name: str, location: str) -> str:
    """The dataset at ``location`` now: ``name``, or what it was renamed to meanwhile (``name`` when none is)."""
    try:
        if cat.get_dataset(name).location == location:
            return name
    except Exception:
        pass
    try:
        return next((d.name for d in cat.list_datasets() if d.location == location), name)
    except Exception:
        return name


def not_recorded(
    cat: Catalog, name: str, format: str, location: str, storage_version: int, e: BaseException, *, first: bool
) -> CommittedNotRecorded:
    reason = first_line(e)
    holder = holder_of(cat, name, location)
    if holder != name:
        fix = f"the dataset at {location} is called {holder!r} now (renamed while this write ran): `dal sync {holder}` records it"
    elif first and location != uris.default_location(name):
        fix = f"`dal register {name} {location}` (or the next dal.write to {name} with this path) records it"
    elif isinstance(e, DatasetNotFound):
        fix = f"{name} was dropped from the catalog while this write ran: `dal register {name} {location}` records it"
    else:
        fix = f"`dal sync {name}` (or the next write to {name}) records it"
    return CommittedNotRecorded(
        f"{name}: the data was committed to storage as {format} version {storage_version} at {location}, "
        f"but the catalog could not record it ({reason}). {fix}; do NOT retry the write: the rows would be "
        "stored twice",
        dataset=name,
        location=location,
        storage_version=storage_version,
    )


def sync_dataset(
    name: str, storage_options: dict[str, str], cat: Catalog, *, adopt: bool, registering: bool
) -> list[VersionInfo]:
    """Record the storage versions of ``name`` committed since the catalog last looked, oldest first.

    ``adopt``: a dataset the catalog does not know whose default location holds a first write dal made for it is
    created first. ``registering``: the versions are a registration's (their rows are the ones the caller declares,
    so a declared time-partition rule is kept).

    Raises:
        DatasetNotFound, DalError: as ``dal.sync``.
    """
    info = _dataset(cat, name, storage_options, adopt)
    fmt = get_format(info.format)
    read_only = is_read_only(info)
    # another catalog's location: refused, naming it (a read-only registration reads it without a claim)
    check_claim(cat, name, fmt, info.location, storage_options or {}, "sync", recorded=True, read_only=read_only)
    last = cat.version(name) if info.latest_version is not None else None
    try:
        drafts = fmt.snapshots(
            info.location,
            dict(storage_options or {}),
            after=last.storage_version if last else None,
            previous=last.schema if last else None,
            partition_types=declared_types(info.properties.get(PARTITION_TYPES_KEY)),
            # the new commits applied to the catalog's record of the last one (Delta): not a replay of the log
            last=Recorded(last, cat.partitions(name, last.number)) if last else None,
        )
    except FormatError as e:  # the format knows the location only: name the dataset too
        raise type(e)(f"{name}: {e}") from e
    out, unchecked = _publish(cat, name, drafts, read_only=read_only, registering=registering)
    _drop_unchecked_rule(cat, info, unchecked)
    _drop_lost_time_column(cat, info, out[-1] if out else None)
    return out


def _dataset(cat: Catalog, name: str, storage_options: Mapping[str, str], adopt: bool) -> DatasetInfo:
    """The catalog's entry for ``name`` (with ``adopt``: created for a first write found unrecorded).

    Raises:
        DatasetNotFound: no such dataset (and nothing to adopt).
    """
    try:
        return cat.get_dataset(name)
    except DatasetNotFound:
        adopted = _adopt_unrecorded(cat, name, storage_options) if adopt else None
        if adopted is None:
            raise
        return adopted


def _publish(
    cat: Catalog, name: str, drafts: Sequence[VersionDraft], *, read_only: bool, registering: bool
) -> tuple[list[VersionInfo], list[VersionInfo]]:
    """Publish the drafts as the next catalog versions, in one transaction (``Catalog.publish_many``: all or none,
    and a re-run records them), leaving out those another process recorded first: the versions recorded, and those
    among them no write of this catalog checked against its declared rule."""
    mine = cat.catalog_id
    marked: list[VersionDraft] = []
    for draft in drafts:
        writer = draft.properties.get(WRITER_CATALOG)
        if not read_only and isinstance(writer, str) and writer != mine:
            # recorded, and said: its rows were written for another catalog, not by this one's writers
            draft = replace(draft, properties={**draft.properties, claims.FOREIGN: True})
        marked.append(draft)
    with progress.task(f"recording versions of {name}", total=len(marked), unit="versions") as line:
        pause("versions-recording")
        out = cat.publish_many(name, marked, skip_recorded=True)  # a line on a terminal
        line.advance(len(marked))
    unchecked: list[VersionInfo] = []  # rows no write of this catalog checked against its declared rule
    for version in out:
        writer = version.properties.get(WRITER_CATALOG)
        if version.properties.get(claims.FOREIGN):
            _log.warning(
                "%s: version %d (storage version %s) was committed by a writer of another catalog (id %s), not "
                "this one; recorded and marked foreign (`dal versions` shows it)", name, version.number,
                version.storage_version, writer,
            )  # fmt: skip
        if writer != mine and not registering:
            unchecked.append(version)
    return out, unchecked


def _drop_lost_time_column(cat: Catalog, info: DatasetInfo, newest: VersionInfo | None) -> None:
    """A schema overwrite that dropped the time column: no dangling name (windows would fail on it), and no
    declared time partitions of it."""
    if info.time_column is None or newest is None or newest.unavailable is not None:
        return
    if info.time_column not in newest.schema.names:
        _log.warning("%s: version %d has no column %r: the dataset has no time column any more (set another "
                     "with time_column= or `dal set --time-column`)", info.name, newest.number, info.time_column)  # fmt: skip
        cat.update_dataset(info.name, clear_time_column=True, properties={timeparts.DATASET_KEY: None})


def _drop_unchecked_rule(cat: Catalog, info: DatasetInfo, unchecked: Sequence[VersionInfo]) -> None:
    """A declared time-partition rule holds only for rows a write checked (``dal.write`` refuses a row that
    breaks it); a version another tool (or another catalog's dal) committed was not checked, and a window pruning
    by the rule could then miss its rows. The rule is dropped, with a warning: windows filter rows from then on."""
    if not unchecked or timeparts.TimePartitions.from_json(info.properties.get(timeparts.DATASET_KEY)) is None:
        return
    first = unchecked[0]
    _log.warning(
        "%s: version %d was committed by a writer that did not check the declared time partitions; the rule is "
        "dropped and windows filter rows instead of skipping partitions (declare it again with "
        "dal.register(..., time_partitions=) or a dal.write(time_partitions=) once the data keeps it)",
        info.name, first.number,
    )  # fmt: skip
    cat.update_dataset(info.name, properties={timeparts.DATASET_KEY: None})


def _adopt_unrecorded(cat: Catalog, name: str, options: Mapping[str, str]) -> DatasetInfo | None:
    """The catalog entry for ``name`` when its default location holds a table dal wrote for it (a first
    write that committed to storage but was stopped before the catalog heard of it); None otherwise."""
    location = uris.default_location(name)
    fmt = detect(location, options, writable=True)
    try:
        found = fmt is not None and fmt.written_for(location, options) == name
    except DalError:
        found = False
    if fmt is None or not found:
        return None
    check_claim(cat, name, fmt, location, options, "sync", recorded=False, take=False)  # not another catalog's
    return cat.create_dataset(name, format=fmt.name, location=location, exist_ok=True, unique_location=True)
