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
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dal import progress, validate
from dal._testhooks import pause
from dal.api import CatalogLike, get_catalog, sync, sync_recorded
from dal.catalog import Catalog, VersionInfo, VersionRef
from dal.catalog.store import EXPIRED_AT, FILES_DELETED, UNAVAILABLE
from dal.catalog.types import DatasetInfo, Schema
from dal.errors import DalError, FilterError, FormatError, PurgeUnfinished, WriteConflict, translating
from dal.formats.base import TARGET_FILE_SIZE, DataFile, Format, Retention, WriteOptions, commit_metadata
from dal.formats.registry import get_format
from dal.ops.first import first_rows
from dal.storage import claims, intents, ownership, uris
from dal.storage.location import Location
from dal.tensors.schema import decode_table
from dal.writes.recording import check_claim, is_read_only, not_recorded

if TYPE_CHECKING:
    pass

SAFE_AGE = timedelta(hours=1)
GC_LOOKS = 3  # looks at the writes in flight before gc settles for deleting expired versions' files only
_DURATION = re.compile(r"\s*(\d+)\s*(s|m|h|d|w)\s*")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
HEAD_MAX_ROWS = 10_000
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


def _nested(info: DatasetInfo, others: Sequence[DatasetInfo]) -> list[str]:
    """Other datasets whose location is this one's or inside it."""
    root = info.location.rstrip("/")
    return [o.name for o in others if o.name != info.name and (o.location == root or o.location.startswith(root + "/"))]


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
    nested = _nested(info, cat.list_datasets())
    if nested:
        raise DalError(
            f"{name}: cannot purge {info.location}: dataset(s) {', '.join(nested)} live there too; "
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
    writable = get_format(info.format).writable and not is_read_only(info)
    if not purge:
        if writable:
            _refuse_unfinished_purge(loc, holder)
        cat.delete_dataset(name)
        if writable:  # this catalog no longer records the location: another may claim it now
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
    for rel in order:
        if not paused and fmt.is_record(rel):
            pause("purge-data-deleted")
            paused = True
        ownership.remove_file(loc, rel)
    ownership.remove_empty_dirs(loc)
    cat.delete_dataset(name)
    pause("purge-dropped")
    claims.release(loc, holder)  # last: a purge stopped before this leaves a claim no catalog records (free)
    ownership.remove_empty_dirs(loc)
    return Dropped(name, info.location, True, tuple(ours), tuple(foreign))


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


@translating("reading the first rows of {name}")
def head(
    name: str,
    version: VersionRef = None,
    *,
    n: int = 10,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> tuple[VersionInfo, list[dict[str, Any]]]:
    """The first ``n`` rows (of ``where``'s matches) of a version as dicts; tensor fields are summarised as
    ``dtype[shape]`` strings, binary values by their length.

    Args:
        name: The dataset's catalog name.
        version: None (latest), a number, a tag, or a time (as ``dal.open``).
        n: How many rows, at most ``HEAD_MAX_ROWS``.
        columns: Only these columns (default: all).
        where: A SQL filter (``"label = 1"``): the first ``n`` matching rows.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        VersionNotFound: no such version.
        FilterError: ``n`` out of range, or ``where`` is not a filter on the version's columns."""
    from dal import api

    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= HEAD_MAX_ROWS:
        raise FilterError(f"-n must be an integer in [0, {HEAD_MAX_ROWS}], not {n!r}")
    ds = api.open(name, version, storage_options=storage_options, catalog=catalog)
    table = first_rows(ds, n, columns, where)  # the files that hold them, not the whole version's footers
    if table is None:
        return ds.version, []
    return ds.version, _display_rows(table, ds.schema)


def _display_rows(table: pa.Table, schema: Schema) -> list[dict[str, Any]]:
    """Rows as dicts for a person: tensors as ``dtype[shape]``, binary values by their length, long lists by
    their length."""
    tensors = [c for c in table.column_names if (f := schema.get(c)) is not None and f.codec not in (None, "scalar")]
    rows = table.drop_columns(tensors).to_pylist() if tensors else table.to_pylist()
    if tensors:
        decoded = decode_table(table.select(tensors), schema)
        for c in tensors:
            for i, value in enumerate(decoded[c]):
                rows[i][c] = _summary(value)
        rows = [{c: r[c] for c in table.column_names} for r in rows]
    return [{k: _cell(v) for k, v in r.items()} for r in rows]


def _summary(value: Any) -> str:
    if value is None:
        return "null"
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"{dtype}[{', '.join(str(d) for d in shape)}]"
    return type(value).__name__


def _cell(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, list) and len(value) > 8:
        return f"list[{len(value)}]"
    return value


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column from Parquet footers (None: not known without reading the data)."""

    name: str
    type: str
    nulls: int | None
    min: Any
    max: Any
    distinct: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.name, "type": self.type, "nulls": self.nulls, "min": _jsonable(self.min),
                "max": _jsonable(self.max), "distinct": self.distinct}  # fmt: skip


@dataclass(frozen=True)
class Stats:
    """Per-column statistics of one version, from its files' footers and partition values (no data read)."""

    dataset: str
    version: int
    rows: int
    files: int
    size_bytes: int
    columns: tuple[ColumnStats, ...]
    exact: bool = True  # False when deletion vectors make footer counts upper bounds

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "rows": self.rows,
            "files": self.files,
            "size_bytes": self.size_bytes,
            "exact": self.exact,
            "columns": [c.to_dict() for c in self.columns],
        }


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


class _Column:
    """What the footers and partition values of a version's files tell of one column so far."""

    def __init__(self) -> None:
        self.nulls = 0
        self.min: Any = None
        self.max: Any = None
        self.known = True  # False: a file whose nulls are not known without reading it

    def see_nulls(self, count: int | None) -> None:
        if count is None:
            self.known = False
        else:
            self.nulls += count

    def see_range(self, lo: Any, hi: Any) -> None:
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)

    def summary(self, fld: pa.Field, schema: Schema, distinct: int | None) -> ColumnStats:
        """The column's statistics (min and max are not shown for binary and tensor columns)."""
        tensor = (cf := schema.get(fld.name)) is not None and cf.codec not in (None, "scalar")
        binary = pa.types.is_binary(fld.type) or pa.types.is_large_binary(fld.type) or tensor
        kind = cf.describe() if tensor and cf is not None else str(fld.type)
        return ColumnStats(fld.name, kind, self.nulls if self.known else None, None if binary else self.min,
                           None if binary else self.max, distinct)  # fmt: skip


@translating("computing statistics of {name}")
def stats(
    name: str,
    version: VersionRef = None,
    *,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> Stats:
    """Rows, nulls, min and max per column from Parquet footers (one footer read per file); for partition
    columns from the partition values, with an exact distinct count. A list, struct or map column's nulls
    are exact when one of its leaves has none (0), else unknown (None); it has no min or max.

    Args:
        name: The dataset's catalog name.
        version: None (latest), a number, a tag, or a time (as ``dal.open``).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        VersionNotFound: no such version.
        FormatError: a data file's Parquet footer cannot be read."""
    from dal import api

    ds = api.open(name, version, storage_options=storage_options, catalog=catalog)
    schema = ds.arrow_schema()
    files = ds.files()
    physical = get_format(ds.info.format).physical_schema(schema)
    to_physical = {f.name: p.name for f, p in zip(schema, physical, strict=True)} if physical is not None else {}
    parts = {c for f in files for c, _v in f.partition_values}
    acc = {f.name: _Column() for f in schema}
    for f in files:
        for c, v in f.partition_values:
            if c in acc:
                if v is None:
                    acc[c].see_nulls(f.row_count)
                else:
                    acc[c].see_range(v, v)
        _footer_stats(f, schema, parts, to_physical, acc, storage_options or {})
    distinct = {c: len({v for f in files for k, v in f.partition_values if k == c and v is not None}) for c in parts}
    columns = tuple(acc[fld.name].summary(fld, ds.schema, distinct.get(fld.name)) for fld in schema)
    pinned = ds.version
    return Stats(name, pinned.number, pinned.row_count, len(files), sum(f.size_bytes for f in files), columns,
                 exact=not any(f.deleted_rows for f in files))  # fmt: skip


def _footer_stats(
    f: DataFile,
    schema: pa.Schema,
    parts: set[str],
    to_physical: Mapping[str, str],
    acc: dict[str, _Column],
    storage_options: Mapping[str, str],
) -> None:
    fs, path = uris.filesystem(f.uri, storage_options)
    try:
        with fs.open_input_file(path) as handle:
            footer = pq.ParquetFile(handle)
            meta, stored = footer.metadata, footer.schema_arrow
    except Exception as e:
        raise FormatError(f"cannot read the Parquet footer of {f.uri}: {e}") from e
    leaves = _leaves(stored, meta.num_columns)
    for fld in schema:
        if fld.name in parts:
            continue
        a = acc[fld.name]
        name = to_physical.get(fld.name, fld.name)
        if leaves is None:  # a footer whose columns dal cannot attribute: nothing is known of this file
            a.see_nulls(None)
            continue
        if name not in leaves:  # not in this file (added later): all null here
            a.see_nulls(f.row_count)
            continue
        for g in range(meta.num_row_groups):
            found = [meta.row_group(g).column(c).statistics for c in leaves[name]]
            counts = [st.null_count if st is not None and st.has_null_count else None for st in found]
            if _is_nested(stored.field(name).type):
                # a leaf's nulls count null and empty lists, null elements and fields too, never fewer than the
                # null rows (each has one null leaf entry): exact only when none; else unknown without a read
                a.see_nulls(0 if 0 in counts else None)
                continue  # an element's or field's min and max are not the column's
            a.see_nulls(counts[0])
            st = found[0]
            if st is not None and st.has_min_max:
                try:
                    a.see_range(st.min, st.max)
                except TypeError:
                    pass  # incomparable logical values (mixed types): leave as is


_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list, pa.types.is_list_view,
          pa.types.is_large_list_view)  # fmt: skip


def _is_nested(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is stored below a group (a list, struct or map), not as one leaf."""
    t = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
    return pa.types.is_struct(t) or pa.types.is_map(t) or any(is_(t) for is_ in _LISTS)


def _leaf_count(t: pa.DataType) -> int:
    """How many Parquet leaf columns store a column of type ``t``."""
    t = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_dictionary(t) or any(is_(t) for is_ in _LISTS):
        return _leaf_count(t.value_type)
    return 1


def _leaves(stored: pa.Schema, columns: int) -> dict[str, range] | None:
    """The leaf columns of each top-level column of a Parquet file (depth first, in schema order), by name:
    a leaf's path (``v.list.element``, ``s.a``) is not the column's name, and a name may hold a dot. None
    when they do not add up to the file's ``columns`` leaves."""
    out, start = {}, 0
    for fld in stored:
        n = _leaf_count(fld.type)
        out[fld.name] = range(start, start + n)
        start += n
    return out if start == columns else None


# -- gc -----------------------------------------------------------------------------------------------------


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
    _delete(name, fmt, loc, deleted, dict(doomed))
    fmt.tidy(info.location, options, deleted)
    done = [v.number for v in [*expiring, *unfinished]]
    if done:  # their files are gone: later gcs need not look at them again
        cat.annotate_versions(name, done, FILES_DELETED, datetime.now(UTC).isoformat())
    return result


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


def _delete(name: str, fmt: Format, loc: Location, deleted: Sequence[str], sizes: Mapping[str, int]) -> None:
    """Delete gc's files, the format's records first (a stable sort), on a terminal's progress line."""
    ordered = sorted(deleted, key=lambda r: not fmt.is_record(r))  # records first (a stable sort)
    for i, rel in enumerate(progress.each(ordered, f"gc {name}: deleting", unit="files", bytes_of=sizes.get)):
        if i == 1:
            pause("gc-deleting")
        ownership.remove_file(loc, rel)


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
    cat.check_writable()
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


__all__ = ["ColumnStats", "Dropped", "GcResult", "Optimized", "Stats", "drop", "gc", "head", "optimize",
           "parse_duration", "purge_plan", "rename", "set_info", "stats"]  # fmt: skip


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

    Raises:
        as ``dal.delete`` and ``gc``.
    """
    from dal.api import delete

    cat = get_catalog(catalog)
    version = delete(name, where, storage_options=storage_options, catalog=cat)
    live = [v for v in cat.versions(name) if v.unavailable is None and v.number >= version.number]
    result = gc(name, keep_last=len(live), force=True, safe_age=safe_age, storage_options=storage_options, catalog=cat)
    return Forgotten(name, version, result.expired, result.deleted)


@dataclass(frozen=True)
class DeletedCheck:
    """What ``verify_deleted`` found: how many data files it read, each file (path below the location) that holds
    rows the predicate matches, with their count, and each file it could not judge (a partition column the
    predicate names is neither in the file nor in its path: Delta column mapping may name partition folders at
    random). The rows are gone only when both lists are empty."""

    dataset: str
    where: str
    files_scanned: int
    files_with_rows: list[tuple[str, int]]
    files_unchecked: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.files_with_rows and not self.files_unchecked

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "where": self.where, "files_scanned": self.files_scanned,
                "files_with_rows": [{"path": p, "rows": n} for p, n in self.files_with_rows],
                "files_unchecked": list(self.files_unchecked), "clean": self.clean}  # fmt: skip


@translating("checking deleted rows of {name}")
def verify_deleted(
    name: str, *, where: str, storage_options: Mapping[str, str] | None = None, catalog: CatalogLike = None
) -> DeletedCheck:
    """Read every Parquet data file under the dataset's location — whatever version (or none) references it,
    change-data files included; the Delta log's checkpoints hold no rows — and count the rows ``where`` matches
    in each (hive partition values from the file's path). What a compliance check after ``forget`` runs.

    Raises:
        FilterError: ``where`` names an unknown column (checked against the latest version, like every filter).
    """
    from dal import expr as E

    validate.check(storage_options=storage_options, catalog=catalog)
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    latest = cat.version(name)
    options = dict(storage_options or {})
    fmt = get_format(info.format)
    schema = fmt.arrow_schema(info.location, latest, options)
    bound = E.bind(E.as_expr(where), schema)
    physical = fmt.physical_schema(schema)  # Delta column mapping: the files' own column names
    stored = dict(zip(schema.names, (physical or schema).names, strict=True))
    needed = {c for c in bound.columns() if c in latest.partition_columns}
    loc = Location.of(info.location, options)
    scanned, found, unchecked = 0, [], []
    for listed in ownership.listing(loc, fmt.table_roots).files:  # never through a link
        rel = listed.rel
        if listed.link or not rel.endswith(".parquet") or fmt.is_record(rel):  # the log (checkpoints): no rows
            continue
        scanned += 1
        matched = _matching_rows(loc, rel, schema, stored, needed, bound)
        if matched is None:
            unchecked.append(rel)
        elif matched:
            found.append((rel, matched))
    return DeletedCheck(name, E.to_sql(bound), scanned, found, unchecked)


def _matching_rows(
    loc: Location, rel: str, schema: pa.Schema, stored: Mapping[str, str], needed: set[str], bound: Any
) -> int | None:
    """The rows of the file ``rel`` that ``bound`` matches: its columns as stored (``stored``: each column's name
    in the files), hive partition values from its path, columns it lacks as nulls; None when a partition column
    ``bound`` names (``needed``) is in neither."""
    from urllib.parse import unquote

    from dal import expr as E

    table = pq.read_table(loc.path(rel), filesystem=loc.fs)
    parts = dict(seg.split("=", 1) for seg in rel.split("/")[:-1] if "=" in seg)
    columns = {}
    for f in schema:
        name = stored.get(f.name, f.name)
        if f.name in needed and name not in table.column_names and f.name not in parts and name not in parts:
            return None
        if name in table.column_names:
            column = table.column(name)
            try:  # as the version's schema types it (a string_view file column: a string)
                columns[f.name] = column if column.type == f.type else column.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                columns[f.name] = column
        elif f.name in parts or name in parts:
            raw = unquote(parts.get(f.name, parts.get(name, "")))
            value = None if raw == "__HIVE_DEFAULT_PARTITION__" else raw
            columns[f.name] = pa.array([value] * table.num_rows, pa.string()).cast(f.type)
        else:
            columns[f.name] = pa.nulls(table.num_rows, f.type)
    rows = pa.table(columns)
    return int(rows.filter(E.to_arrow(bound, rows.schema)).num_rows)
