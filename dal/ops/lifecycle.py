"""Day-2 operations on catalog datasets: drop (and purge), rename, set, head, stats, optimize (compaction) and gc
(retention).

Deleting data is the dangerous part, so the rules are few and strict:

* only files dal writes are ever deleted (``Format.owns``: e.g. a Delta table's log and Parquet data files,
  a Petastorm dataset's version directories and records), and only inside the dataset's location;
* listings for deletion never follow symbolic links (``dal.storage.ownership``): a linked directory inside a
  location is reported and never descended into, a linked file is deleted as the link, never its target;
* ``drop --purge`` refuses a location that holds anything else (or another dataset) unless ``force``
  (then only dal's files are deleted, the others are left and listed);
* ``gc`` deletes only files that no kept version references: the files of the versions it expires, and
  files no version references (abandoned by killed writers) that no write in flight claims
  (``dal.storage.intents``: every write registers an intent before it stages anything, and gc looks at the
  intents before anything else) and that are older than ``safe_age`` (a second line of defence). Versions
  are marked expired in the catalog *before* their files go, so a crash leaves files behind, never a
  readable-looking version without data; the next gc deletes them (the versions an earlier gc expired and
  did not finish are expiring again for it, until a gc marks their files deleted).
* ``drop --purge`` refuses while a write is in flight at the location; a purge stopped half-way is finished
  by the next one (the catalog entry goes last).

Why one module: each day-2 operation is a short function over the catalog and a ``Format``, and they share the
confirmation, ownership and progress preamble that makes deletion safe; one file keeps the destructive entry
points in one place to review.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from dal import progress, validate
from dal._testhooks import pause
from dal.api import CatalogLike, get_catalog, sync, sync_recorded
from dal.catalog import Catalog, VersionInfo
from dal.catalog.store import EXPIRED_AT, FILES_DELETED, UNAVAILABLE
from dal.catalog.types import DatasetInfo
from dal.errors import DalError, FormatError, PurgeUnfinished, WriteConflict, translating
from dal.formats.base import TARGET_FILE_SIZE, Format, Retention, WriteOptions, commit_metadata
from dal.formats.registry import get_format
from dal.ops.content import HEAD_MAX_ROWS, ColumnStats, DeletedCheck, Stats, display_rows, head, stats, verify_deleted
from dal.storage import claims, intents, ownership
from dal.storage.location import Location
from dal.writes.recording import check_claim, is_read_only, not_recorded

if TYPE_CHECKING:
    pass

SAFE_AGE = timedelta(hours=1)
GC_LOOKS = 3  # looks at the writes in flight before gc settles for deleting expired versions' files only
_DURATION = re.compile(r"\s*(\d+)\s*(s|m|h|d|w)\s*")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
OPTIMIZE_TRIES = 3  # compactions overtaken by another commit before optimize gives up (WriteConflict)


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``15m``, ``45s``, ``2w`` as a timedelta.

    Args:
        text: A number and a unit: ``s``, ``m``, ``h``, ``d`` or ``w``.

    Raises:
        DalError: not a duration, or longer than ``timedelta`` holds."""
    m = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if m is None or len(m.group(1)) > 9:
        raise DalError(f"{text!r} is not a duration: write a number and a unit, e.g. 30d, 12h, 15m, 45s or 2w")
    try:
        return timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
    except OverflowError:  # 999999999w: beyond what a timedelta holds (about 2.7 million years)
        raise DalError(f"{text!r} is too long a duration: at most {timedelta.max.days:,} days") from None


# -- helpers ---------------------------------------------------------------------------------------------


def _written_by_dal(info: DatasetInfo) -> Format | None:
    """The dataset's format when dal writes it (and so knows which files are its own); None otherwise."""
    fmt = get_format(info.format)
    return fmt if fmt.writable else None


# -- drop, rename, set ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dropped:
    """What ``drop`` did: the dataset's location, the files it deleted and the foreign ones it left."""

    name: str
    location: str
    purged: bool
    deleted: tuple[str, ...] = ()
    left: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.name,
            "location": self.location,
            "purged": self.purged,
            "deleted_files": len(self.deleted),
            "left": list(self.left),
        }


def purge_plan(
    name: str, *, storage_options: Mapping[str, str] | None = None, catalog: CatalogLike = None
) -> tuple[list[str], list[str]]:
    """The files ``drop(name, purge=True)`` would delete and the foreign ones it would leave (paths relative
    to the dataset's location; a linked directory, never followed, as ``<path>/``).

    Args:
        name: The dataset's catalog name.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        DalError: another dataset lives at or inside the location, or dal cannot delete this dataset's files."""
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    nested = cat.co_located(name)  # every record, not only those the caller may list (a served catalog's)
    if nested:
        raise DalError(
            f"{name}: cannot purge {info.location}: {', '.join(nested)} live(s) there too (at, inside or around it); "
            "nothing was deleted (drop without --purge, or drop those first)"
        )
    fmt = _written_by_dal(info)
    if fmt is None:
        raise DalError(
            f"{name} is a {info.format} dataset dal registered read-only: dal did not write its files and will not "
            "delete them; drop it without --purge"
        )
    loc = Location.of(info.location, storage_options)
    writes = intents.scan(loc)
    if writes.live or writes.unreadable:
        raise DalError(
            f"{name}: a write is in flight at {info.location} ({writes.describe()}); nothing was deleted. Purge "
            f"after it ends (a killed writer's intent expires {intents.EXPIRES_AFTER_S / 60:.0f} min after its "
            "last heartbeat, at once on its own machine)"
        )
    ours: list[str] = []
    foreign: list[str] = []
    listed = ownership.listing(loc, fmt.table_roots)
    for f in listed.files:
        if claims.is_claim(f.rel):
            continue  # the location's claim: released after the catalog entry goes (drop)
        (ours if fmt.owns(f.rel) or intents.is_marker(f.rel) else foreign).append(f.rel)
    foreign += [f"{rel}/" for rel in listed.linked_dirs]  # dal never follows a link, nor deletes one it did not make
    foreign += [f"{rel}/" for rel in listed.nested]  # another dataset's location (a claim there): never this one's
    return sorted(ours), sorted(foreign)


@translating("dropping {name}")
def drop(
    name: str,
    *,
    purge: bool = False,
    force: bool = False,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> Dropped:
    """Remove a dataset, its versions and tags from the catalog; with ``purge`` also delete its data.

    Purging deletes only the files dal writes inside the dataset's location (see the module notes) and
    refuses a location that holds other files unless ``force`` (which still deletes only dal's files). The
    data goes first, the catalog entry last: a purge that fails half-way can be run again.

    Args:
        name: The dataset's catalog name.
        purge: Also delete the dataset's data (only the files dal wrote).
        force: Purge even when the location holds files dal did not write (they are left in place).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        DalError: foreign files without ``force`` (another location's claim inside it among them), another
            dataset inside the location, or a read-only (plain Parquet) dataset.
        PurgeUnfinished: a drop without ``purge`` of a dataset whose purge was stopped half-way (finish it with
            ``purge``).
    """
    validate.check(storage_options=storage_options, catalog=catalog)
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    loc = Location.of(info.location, storage_options)
    holder = claims.Holder(cat.catalog_id, cat.display, name)
    cat.check_writable(name, manage=True)  # before any file goes (a dal serve catalog: MANAGE on it)
    writable = get_format(info.format).writable and not is_read_only(info)
    if not purge:
        if writable:
            _refuse_unfinished_purge(loc, holder)
        shared = writable and bool(cat.co_located(name))  # another record of this catalog is there: its claim
        cat.delete_dataset(name)
        if writable and not shared:  # this catalog no longer records the location: another may claim it now
            claims.release(loc, holder)
        return Dropped(name, info.location, False)
    if is_read_only(info):
        check_claim(cat, name, get_format(info.format), info.location, storage_options or {}, "purge",
                    recorded=True, read_only=True)  # fmt: skip
    ours, foreign = purge_plan(name, storage_options=storage_options, catalog=cat)
    if foreign and not force:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise DalError(
            f"{name}: {info.location} holds {len(foreign)} file(s) dal did not write ({shown}); nothing was deleted. "
            "Use --force to delete dal's files and leave those"
        )
    fmt = get_format(info.format)
    # marked before anything goes: a write is refused until the purge is finished (a Delta log whose data files
    # are gone would take a commit no read can serve); a write that registered its intent meanwhile stops it
    claims.mark_purging(loc, holder)
    late = intents.scan(loc)
    if late.live or late.unreadable:
        claims.unmark_purging(loc, holder)
        raise DalError(f"{name}: a write began at {info.location} while the purge started ({late.describe()}); "
                       "nothing was deleted. Purge after it ends")  # fmt: skip
    pause("purge-marked")
    # data first, the commit records last: an interrupted purge leaves a dataset dal still recognises
    order = sorted(ours, key=lambda r: (fmt.is_record(r), r))
    paused = False
    removed = set()
    for rel in order:
        if not paused and fmt.is_record(rel):
            pause("purge-data-deleted")
            paused = True
        if ownership.remove_file(loc, rel):
            removed.add(rel)
    ownership.remove_empty_dirs(loc)
    cat.delete_dataset(name)
    pause("purge-dropped")
    claims.release(loc, holder)  # last: a purge stopped before this leaves a claim no catalog records (free)
    ownership.remove_empty_dirs(loc)
    return Dropped(name, info.location, True, tuple(r for r in ours if r in removed), tuple(foreign))


def _refuse_unfinished_purge(loc: Location, holder: claims.Holder) -> None:
    """Refuse (``PurgeUnfinished``) a plain drop of a dataset whose purge was stopped half-way: releasing its
    ``purging`` claim would let the next write adopt a log whose data files are gone and commit on top of it."""
    try:
        claim = claims.read(loc)
    except FormatError:
        return  # not a claim dal wrote: release leaves it alone too
    if claim is not None and claim.held_by(holder) and claim.purging:
        raise PurgeUnfinished(
            f"{holder.dataset}: a purge of {loc.uri} was stopped half-way; nothing was dropped. Finish it with "
            f"`dal drop {holder.dataset} --purge`"
        )


@translating("renaming {name}")
def rename(name: str, new_name: str, *, catalog: CatalogLike = None) -> DatasetInfo:
    """Rename a dataset in the catalog; its data, versions and tags stay (the location is not moved).

    Args:
        name: The dataset's catalog name.
        new_name: Its new name.
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset called ``name``.
        DatasetExists: a dataset called ``new_name`` exists.
        InvalidName: ``new_name`` is not a dataset name."""
    return get_catalog(catalog).rename_dataset(name, new_name)


@translating("updating {name}")
def set_info(
    name: str,
    *,
    description: str | None = None,
    owner: str | None = None,
    time_column: str | None = None,
    properties: Mapping[str, Any] | None = None,
    catalog: CatalogLike = None,
) -> DatasetInfo:
    """Change a dataset's description, owner, time column or properties (``None`` removes a property).

    Args:
        name: The dataset's catalog name.
        description: Its new description (None: unchanged).
        owner: Its new owner (None: unchanged).
        time_column: The column ``Scan.window`` filters on, a column of its latest version (None: unchanged).
        properties: Properties to set; a value of None removes that property.
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        DalError: ``time_column`` is not a column of the latest version."""
    cat = get_catalog(catalog)
    if time_column is not None:
        info = cat.get_dataset(name)
        if info.latest_version is not None and time_column not in cat.version(name).schema.names:
            raise DalError(f"{name}: time column {time_column!r} is not a column of its latest version")
    return cat.update_dataset(name, description=description, owner=owner, time_column=time_column,
                              properties=properties)  # fmt: skip


# -- head and stats ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GcResult:
    """What ``gc`` expired and deleted (or, with ``dry_run``, would)."""

    dataset: str
    dry_run: bool
    expired: tuple[int, ...]
    kept: tuple[int, ...]
    deleted: tuple[str, ...]
    bytes: int
    skipped_tagged: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    finished: tuple[int, ...] = ()  # versions an earlier, interrupted gc expired, whose files this one deleted
    not_followed: tuple[str, ...] = ()  # linked directories inside the location: never descended into

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "dry_run": self.dry_run,
            "expired_versions": list(self.expired),
            "kept_versions": list(self.kept),
            "kept_because_tagged": list(self.skipped_tagged),
            "finished_versions": list(self.finished),
            "deleted_files": list(self.deleted),
            "deleted_bytes": self.bytes,
            "links_not_followed": list(self.not_followed),
        }


def _choose(
    versions: Sequence[VersionInfo], keep_last: int | None, older_than: timedelta | None, force: bool, now: datetime
) -> tuple[list[VersionInfo], list[VersionInfo], list[int]]:
    """(expiring, kept, kept only because tagged) among the available versions; the newest is always kept."""
    live = [v for v in versions if v.unavailable is None]
    if keep_last is None and older_than is None:
        return [], live, []
    newest = live[-keep_last:] if keep_last else live[-1:]
    protected = {v.number for v in newest} | ({live[-1].number} if live else set())
    expiring, kept, tagged = [], [], []
    try:
        cutoff = None if older_than is None else now - older_than
    except OverflowError:  # older than the year 1: no version is that old
        cutoff = datetime.min.replace(tzinfo=now.tzinfo)
    for v in live:
        old = cutoff is None or v.created_at <= cutoff
        if v.number in protected or not old:
            kept.append(v)
        elif v.tags and not force:
            kept.append(v)
            tagged.append(v.number)
        else:
            expiring.append(v)
    return expiring, kept, tagged


@translating("collecting garbage of {name}")
def gc(
    name: str,
    *,
    keep_last: int | None = None,
    older_than: timedelta | None = None,
    dry_run: bool = False,
    force: bool = False,
    safe_age: timedelta = SAFE_AGE,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> GcResult:
    """Expire old versions and delete the files no kept version needs.

    A version expires when it is not among the ``keep_last`` newest and (with ``older_than``) is older
    than that; the newest version is always kept, tagged ones unless ``force``. Expired versions stay in
    the history, marked expired; opening one says so. Deleted: the files of expired versions no kept version
    references (and of versions an interrupted gc expired), and files no version references at all
    (abandoned by killed writers) that no write in flight claims (``dal.storage.intents``) and that are older
    than ``safe_age``; the intent markers of dead writers. Without ``keep_last`` and ``older_than`` nothing
    expires (only abandoned files go). A second gc with the same arguments finds nothing to do.

    Args:
        name: The dataset's catalog name.
        keep_last: Keep the newest ``keep_last`` versions (at least 1).
        older_than: Expire only versions older than this.
        dry_run: Report what would expire and be deleted; change nothing.
        force: Expire tagged versions too.
        safe_age: Files no version references are deleted only when older than this (a write in flight may
            still commit them).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        DalError: a bad argument, or a dataset registered read-only (gc deletes none of its files).
    """
    validate.check(storage_options=storage_options, catalog=catalog)
    _check_gc_arguments(keep_last, older_than, safe_age)
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    fmt = _written_by_dal(info)
    if fmt is None:
        raise DalError(f"{name} is a {info.format} dataset dal registered read-only: gc does not delete its files")
    options = dict(storage_options or {})
    loc = Location.of(info.location, options)
    if not dry_run:
        cat.check_writable(name, manage=True)  # before any file goes (a dal serve catalog: MANAGE on it)
    # only the catalog that owns the location deletes there (a dry run says so too, and claims nothing)
    check_claim(cat, name, fmt, info.location, options, "gc", recorded=True, read_only=is_read_only(info),
                take=not dry_run)  # fmt: skip

    def synced() -> list[VersionInfo]:  # know every committed version before judging files
        if info.latest_version is None and not fmt.exists(info.location, options):
            return []
        return sync(name, storage_options=options, catalog=cat)

    # writes in flight (dal.storage.intents), looked at before the sync and again after the listing (with a
    # second sync): every write is then committed before the first sync, in flight at a look, or committed
    # between the two (then gc looks again), so no file of a running write is judged by its age alone
    writes = intents.scan(loc)
    synced()
    now = datetime.now(UTC)
    judged, writes = _judge(name, cat, fmt, info.location, loc, options, writes, synced, (keep_last, older_than, force),
                            safe_age, now)  # fmt: skip
    doomed = judged.doomed + [m for m in writes.expired if m[0] not in dict(judged.doomed)]  # dead writers' intents
    doomed.sort()
    size = sum(s for _r, s in doomed)
    deleted = tuple(r for r, _s in doomed)
    linked = ownership.listing(loc).linked_dirs if loc.local else ()  # object stores have no links
    expiring, kept, unfinished = judged.expiring, judged.kept, judged.unfinished
    result = GcResult(name, dry_run, tuple(v.number for v in expiring), tuple(v.number for v in kept), deleted, size,
                      tuple(judged.tagged), tuple(judged.notes), tuple(v.number for v in unfinished),
                      not_followed=linked)  # fmt: skip
    if dry_run:
        return result
    fmt.prepare_gc(info.location, options, kept, deleted)  # e.g. a Delta checkpoint, before anything is deleted
    if expiring:
        reason = f"expired by dal gc on {now.strftime('%Y-%m-%d %H:%M')} UTC; its files were deleted"
        cat.expire_versions(name, [v.number for v in expiring], reason)
    pause("gc-expired")
    # again, just before the first delete: a take-over since the first check moved the location to a catalog
    # whose versions may pin these files (ClaimedElsewhere: nothing deleted)
    check_claim(cat, name, fmt, info.location, options, "gc", recorded=True, read_only=is_read_only(info), take=False)
    gone = _delete(name, fmt, loc, deleted, dict(doomed))
    fmt.tidy(info.location, options, gone)
    done = [v.number for v in [*expiring, *unfinished]]
    if done:  # their files are gone (or never will be, through a link): later gcs need not look at them again
        cat.annotate_versions(name, done, FILES_DELETED, datetime.now(UTC).isoformat())
    left = len(deleted) - len(gone)
    if not left:
        return result
    note = (f"{left} file(s) were not deleted: gone before gc reached them, or reached through a symbolic link "
            "that replaced a folder after gc listed it (dal never deletes through a link)")  # fmt: skip
    sizes = dict(doomed)
    return replace(result, deleted=gone, bytes=sum(sizes[r] for r in gone), notes=(*result.notes, note))


def _check_gc_arguments(keep_last: int | None, older_than: timedelta | None, safe_age: timedelta) -> None:
    """Refuse (``DalError``) a ``keep_last``, ``older_than`` or ``safe_age`` gc cannot use."""
    if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1):
        raise DalError(f"keep_last must be an integer >= 1 (the newest version is always kept), not {keep_last!r}")
    if older_than is not None and (not isinstance(older_than, timedelta) or older_than < timedelta(0)):
        raise DalError(f"older_than must be a non-negative timedelta, not {older_than!r}")
    if not isinstance(safe_age, timedelta) or safe_age < timedelta(0):
        raise DalError(f"safe_age must be a non-negative timedelta, not {safe_age!r}")


@dataclass(frozen=True)
class _Judged:
    """What gc's last look chose: the versions expiring, kept (``tagged``: kept for their tags), unfinished
    (expired by a gc stopped before deleting), the files to delete, and notes for the result."""

    expiring: list[VersionInfo]
    kept: list[VersionInfo]
    tagged: list[int]
    unfinished: list[VersionInfo]
    doomed: list[tuple[str, int]]
    notes: list[str]


def _judge(
    name: str,
    cat: Catalog,
    fmt: Format,
    location: str,
    loc: Location,
    options: dict[str, str],
    writes: intents.InFlight,
    synced: Callable[[], object],
    choice: tuple[int | None, timedelta | None, bool],
    safe_age: timedelta,
    now: datetime,
) -> tuple[_Judged, intents.InFlight]:
    """Choose the versions that expire and the files that go, looking again while writes land (at most
    ``GC_LOOKS`` times; then only expired versions' files go). Returns the choice and every write in flight
    seen (``writes`` and those found at each look; why gc looks twice: the note in ``gc``)."""
    keep_last, older_than, force = choice
    notes: list[str] = []
    for look in range(GC_LOOKS + 1):
        settled = look < GC_LOOKS
        versions = cat.versions(name)
        expiring, kept, tagged = _choose(versions, keep_last, older_than, force, now)
        unfinished = [_unexpired(v) for v in versions if _unfinished(v)]  # expired by a gc stopped before deleting
        pause("gc-chosen")
        # settled: the writes in flight claim their files; else every unreferenced file counts as claimed
        retention = Retention(safe_age.total_seconds(), writes.claims if settled else _everything)
        doomed = fmt.garbage(name, location, options, [*expiring, *unfinished], kept, retention)
        if not settled:  # writes kept landing: this gc deletes expired versions' files only
            notes.append("writes kept starting while gc looked: files no version references are left to a later gc")
            break
        pause("gc-listed")
        later = intents.scan(loc)
        news = writes.news(later)
        writes = writes | later
        synced()  # and what a writer recorded itself meanwhile:
        landed = cat.get_dataset(name).latest_version != (versions[-1].number if versions else None)
        if not landed and not news:
            break
    return _Judged(expiring, kept, tagged, unfinished, doomed, notes), writes


def _delete(name: str, fmt: Format, loc: Location, deleted: Sequence[str], sizes: Mapping[str, int]) -> tuple[str, ...]:
    """Delete gc's files, the format's records first (a stable sort), on a terminal's progress line; the ones
    deleted, in ``deleted``'s order (not those already gone, nor those ``remove_file`` refused: through a link)."""
    ordered = sorted(deleted, key=lambda r: not fmt.is_record(r))  # records first (a stable sort)
    removed = set()
    for i, rel in enumerate(progress.each(ordered, f"gc {name}: deleting", unit="files", bytes_of=sizes.get)):
        if i == 1:
            pause("gc-deleting")
        if ownership.remove_file(loc, rel):
            removed.add(rel)
    return tuple(r for r in deleted if r in removed)


# -- optimize -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Optimized:
    """What ``optimize`` did: the version it recorded (None: already compact) and the files before and after."""

    dataset: str
    version: int | None
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "files_before": self.files_before,
            "files_after": self.files_after,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }


@translating("optimizing {name}")
def optimize(
    name: str,
    *,
    target_file_size: int = TARGET_FILE_SIZE,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> Optimized:
    """Compact the latest version's small files into a new version with the same rows, schema and partitioning.

    Delta: delta-rs's ``optimize.compact`` (files bin-packed towards ``target_file_size`` within each partition;
    the commit changes no data). Petastorm: the rows rewritten into one file per partition value as a new
    version. Older versions stay readable; ``dal gc`` reclaims their small files once they expire.

    Args:
        name: The dataset's catalog name.
        target_file_size: Bytes per file to aim for (Delta).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no such dataset.
        DalError: a dataset dal registered read-only (plain Parquet, an adopted Petastorm dataset), one with no
            versions, or a ``target_file_size`` that is not an integer in [1, 2**63-1].
    """
    validate.check(storage_options=storage_options, catalog=catalog)
    target_file_size = validate.file_size(target_file_size)
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    fmt = _written_by_dal(info)
    if fmt is None:
        raise DalError(f"{name} is a {info.format} dataset dal registered read-only: optimize does not rewrite it")
    options = dict(storage_options or {})
    if info.latest_version is None:
        raise DalError(f"{name} has no versions to optimize")
    check_claim(cat, name, fmt, info.location, options, "optimize", recorded=True, read_only=is_read_only(info))
    cat.check_writable(name, manage=True)  # a dal serve catalog: optimize needs MANAGE (it rewrites the files)
    for attempt in range(OPTIMIZE_TRIES):
        # never publish less than it read: the compaction commits only on the version it read, so an append
        # that lands meanwhile makes it a WriteConflict, and it is done again on the new newest version
        sync(name, storage_options=options, catalog=cat)  # compact what storage holds now, recorded
        latest = cat.version(name)
        before = fmt.files(info.location, latest, options)
        opts = WriteOptions(
            mode="overwrite", storage_options=options,
            commit_metadata=commit_metadata(uuid.uuid4().hex, name, cat.catalog_id),
        )  # fmt: skip
        try:
            with intents.registered(Location.of(info.location, options), opts.write_id, name):
                pause("optimize-read")
                with progress.task(f"optimizing {name}", total=latest.row_count):  # a line on a terminal only
                    storage_version = fmt.compact(info.location, latest, opts, target_file_size)
            break
        except WriteConflict:
            if attempt == OPTIMIZE_TRIES - 1:
                raise
    if storage_version is None:
        size = sum(f.size_bytes for f in before)
        return Optimized(name, None, len(before), len(before), size, size)
    version = _record_rewrite(cat, name, info, options, storage_version)
    after = fmt.files(info.location, version, options)
    return Optimized(name, version.number, len(before), len(after), sum(f.size_bytes for f in before),
                     sum(f.size_bytes for f in after))  # fmt: skip


def _record_rewrite(
    cat: Catalog, name: str, info: DatasetInfo, options: Mapping[str, str], storage_version: int
) -> VersionInfo:
    """Record a rewrite committed to ``info``'s location as a version of ``name``: the dataset that is there now
    (never re-adopted when it was dropped or renamed meanwhile).

    Raises:
        CommittedNotRecorded: the dataset was dropped, renamed or moved while the rewrite ran (naming the
            ``dal sync`` or ``dal register`` that records it), or the catalog failed.
    """
    pause("rewrite-committed")
    try:
        current = cat.get_dataset(name)
        if current.location != info.location:
            raise DalError(f"{name} is now the dataset at {current.location}, not {info.location}")
        recorded = [v for v in sync_recorded(name, options, cat) if v.storage_version == storage_version]
        found = recorded or [v for v in cat.versions(name) if v.storage_version == storage_version]
        if not found:
            raise FormatError(f"storage version {storage_version} is not among the versions sync found")
    except Exception as e:
        raise not_recorded(cat, name, info.format, info.location, storage_version, e, first=False) from e
    return found[0]


def _everything(rel: str, age: float) -> bool:
    return True


def _unfinished(v: VersionInfo) -> bool:
    """Whether a gc expired ``v`` and was stopped before it deleted the version's files."""
    return bool(v.properties.get(EXPIRED_AT)) and not v.properties.get(FILES_DELETED)


def _unexpired(v: VersionInfo) -> VersionInfo:
    """``v`` as the format describes its files: without the catalog's "unavailable" mark gc set."""
    return dataclasses.replace(v, properties={k: x for k, x in v.properties.items() if k != UNAVAILABLE})


__all__ = [
    "HEAD_MAX_ROWS",
    "ColumnStats",
    "DeletedCheck",
    "Dropped",
    "GcResult",
    "Optimized",
    "Stats",
    "display_rows",
    "drop",
    "gc",
    "head",
    "optimize",
    "parse_duration",
    "purge_plan",
    "rename",
    "set_info",
    "stats",
    "verify_deleted",
]  # fmt: skip


@dataclass(frozen=True)
class Forgotten:
    """What ``forget`` did: the version without the rows, the versions expired (which held them), the files
    deleted."""

    dataset: str
    version: VersionInfo
    expired: tuple[int, ...]
    deleted: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "version": self.version.number, "expired_versions": list(self.expired),
                "deleted_files": list(self.deleted)}  # fmt: skip


@translating("forgetting rows of {name}")
def forget(
    name: str,
    *,
    where: str,
    safe_age: timedelta = SAFE_AGE,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> Forgotten:
    """Make the rows ``where`` matches unreadable in every retained version and gone from storage: ``dal.delete``
    them (a new version without them), expire every version before that one — tagged ones too: they hold the
    rows — and delete the files no kept version needs (``gc``). ``verify_deleted`` then checks that no data file
    under the location holds a matching row.

    Args:
        name: The dataset.
        where: The rows to forget, an SQL predicate (``"user_id = 42"``) as ``dal.delete`` takes it.
        safe_age: Files younger than this are kept (a write in flight may still need them), as ``gc``'s.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Returns:
        The new version without the rows, the versions expired and the files deleted.

    Raises:
        DatasetNotFound: no dataset of that name.
        FilterError: the predicate names an unknown column or holds a bad literal.
        WriteConflict: a commit landed after the latest version (nothing was deleted).
        DalError: the others ``dal.delete`` and ``gc`` raise (a read-only or claimed dataset, bad arguments).
    """
    from dal.api import delete

    cat = get_catalog(catalog)
    version = delete(name, where, storage_options=storage_options, catalog=cat)
    live = [v for v in cat.versions(name) if v.unavailable is None and v.number >= version.number]
    result = gc(name, keep_last=len(live), force=True, safe_age=safe_age, storage_options=storage_options, catalog=cat)
    return Forgotten(name, version, result.expired, result.deleted)
