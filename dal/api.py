"""The public functions (open, write, delete, register, sync: thin, above ``dal.writes``), the default catalog."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from dal import lineage, openlineage, validate
from dal.catalog import (
    CatalogUnavailable,
    DatasetInfo,
    VersionInfo,
    VersionRef,
    default_url,
    remote,
    retry,
)
from dal.catalog.types import validate_name
from dal.dataset import Dataset
from dal.errors import DalError, FormatError, SchemaMismatch, translating
from dal.formats.base import DEFAULT_COMPRESSION, DEFAULT_FORMAT, SchemaMode, WriteMode
from dal.formats.registry import get_format
from dal.storage import claims, timeparts, uris
from dal.storage.location import Location
from dal.storage.partitions import PARTITION_TYPES_KEY, check_partition_types
from dal.storage.timeparts import TimePartitions
from dal.tensors.schema import TensorSchema
from dal.writes import commit, credentials, refusals
from dal.writes.changes import Overwrite
from dal.writes.recording import check_claim, sync_dataset

if TYPE_CHECKING:
    from dal.catalog import Catalog
    from dal.catalog.lite import LiteCatalog
    from dal.expr import Expr

_catalogs: dict[str, Catalog] = {}
# the quick read-only readers (catalog.lite, no SQLAlchemy) ``open`` pins versions through, per URL and process
_readers: dict[tuple[str, int], LiteCatalog | None] = {}
_lock = threading.Lock()
CatalogLike: TypeAlias = "Catalog | str | None"
_log = logging.getLogger("dal")


def get_catalog(catalog: CatalogLike = None, *, must_exist: bool = False) -> Catalog:
    """The catalog at ``catalog`` (a URL or a Catalog; default ``$DAL_CATALOG_URL`` or the embedded SQLite
    file), opened once per process and URL.

    Args:
        catalog: A URL, a Catalog (returned as is), or None for the default.
        must_exist: for reads: an SQLite catalog file that does not exist is an error (nothing is created).

    Raises:
        CatalogUnavailable: the catalog cannot be opened (or, ``must_exist``, its SQLite file is missing).
    """
    from dal.catalog import Catalog

    if isinstance(catalog, Catalog):
        return catalog
    if isinstance(catalog, remote.RemoteCatalog):  # what get_catalog gave for a dal serve URL, passed on
        return cast("Catalog", catalog)
    key = catalog or default_url()
    if remote.is_remote(key):  # a dal serve catalog: the server checks grants, records, audits (dal.catalog.remote)
        # RemoteCatalog has the methods of Catalog that reads and writes use; any other is RemoteNotSupported
        return cast("Catalog", remote.client(key))
    with _lock:
        if key not in _catalogs:
            _catalogs[key] = Catalog(key, must_exist=must_exist)
        return _catalogs[key]


@translating("opening {name}")
def open(
    name: str,
    version: VersionRef = None,
    *,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
    cache: str | None = None,
    cache_size: int | str | None = None,
    cache_dir: str | None = None,
) -> Dataset:
    """Pin one version of a dataset: ``None`` (latest), a number (an int or a NumPy integer), a tag, or a time
    (a datetime, a date or an ISO string: the version current then; naive times and dates are UTC).

    A string is a tag when a tag of exactly that text exists, otherwise a time: a tag named ``2026-04-01``
    wins over reading that string as a date. A ``date`` / ``datetime`` object is always a time.

    ``cache="local"`` keeps the byte ranges reads fetch from object storage (footers, column chunks) on local
    disk, so later epochs read them from there (``dal.storage.rangecache``): at most ``cache_size`` bytes (an int or
    '20GB'; default ``$DAL_CACHE_SIZE``, else 10 GiB) under ``cache_dir`` (default ``$DAL_FILE_CACHE_DIR``,
    else ``<DAL_HOME>/filecache``). Local datasets are read in place.

    Args:
        name: The dataset's catalog name.
        version: None (latest), a number, a tag, or a time.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).
        cache: ``'local'`` to keep remote files on local disk.
        cache_size: The file cache's limit (bytes or '20GB').
        cache_dir: The file cache's folder.

    Raises:
        DatasetNotFound: no dataset of that name (the message names close ones).
        VersionNotFound: no such version, tag or time (the message names close ones).
        InvalidName: the name is not a dataset name.
        CatalogUnavailable: the catalog cannot be opened (a missing SQLite catalog file is not created).
        FormatError: the version is recorded as unavailable (its files or log are gone).
        DalError: a bad cache option.
    """
    validate.check(storage_options=storage_options, catalog=catalog)
    file_cache = None
    if cache is not None:
        from dal.storage import rangecache

        if cache not in rangecache.MODES:
            raise DalError(f"cache must be None or 'local', not {cache!r}")
        file_cache = rangecache.FileCache.create(cache_dir, cache_size)
    elif cache_size is not None or cache_dir is not None:
        raise DalError("cache_size and cache_dir apply to a cached read: pass cache='local' too")
    info, pinned = _pin(name, version, catalog)
    unavailable = pinned.properties.get("unavailable")  # recorded by sync: expired log, data files gone
    if unavailable:
        raise FormatError(
            f"{name} version {pinned.number} (storage version {pinned.storage_version}) cannot be read: {unavailable}"
        )
    lineage.record_read(info.name, pinned.number)  # the process-wide read log: upstream of later writes
    openlineage.emit_read(info.name, pinned.number)  # with DAL_OPENLINEAGE_READS=1 only
    url = catalog if catalog is None or isinstance(catalog, str) else str(catalog.url)  # None: the default
    pinner = remote.served(catalog or default_url())  # the very client that pinned (a user's RemoteCatalog too)
    vended = pinner.vended(info.name, pinned.number) if pinner is not None else None
    if vended is not None or file_cache is not None:  # vended: short-lived credentials, travelling with the Dataset
        from dal.storage.rangecache import ReadOptions

        if vended is None:
            return Dataset(info, pinned, ReadOptions.of(storage_options, file_cache), catalog_url=url)
        options = ReadOptions.of(remote.with_vended(storage_options, vended["options"]), file_cache,
                                 str(vended.get("expires") or "") or None, f"{info.name} version {pinned.number}")  # fmt: skip
        return Dataset(info, pinned, options, catalog_url=url)
    return Dataset(info, pinned, dict(storage_options or {}), catalog_url=url)


def _pin(name: str, version: VersionRef, catalog: CatalogLike) -> tuple[DatasetInfo, VersionInfo]:
    """The dataset and the version ``version`` names: from the quick reader (``dal.catalog.lite``: no SQLAlchemy to
    import or compile, the same frozen values) when it resolves the reference exactly — the latest version, a
    number or a tag that exists —, else from the Catalog, which resolves the rest (times) and raises every error.
    A PostgreSQL server that refuses connections for now is retried, both readers together for at most
    ``DAL_CATALOG_RETRY_S`` seconds (``dal.catalog.retry``).

    Raises:
        DatasetNotFound / VersionNotFound (with close names), InvalidName, CatalogUnavailable.
    """
    with retry.window():
        served = remote.served(catalog or default_url())
        if served is not None:  # a dal serve catalog: the server resolves, checks the grant, audits
            return served.pin(name, version)
        if catalog is None or isinstance(catalog, str):
            key = catalog or default_url()
            reader = None if key in _catalogs else _reader(key)  # a Catalog open already answers as quickly
            if reader is not None:
                try:
                    found = reader.pin(name, version)
                    if found is not None:
                        return found
                except Exception as e:  # the Catalog decides: the same question, its own answer or error
                    _log.debug("quick catalog reader: %s; asking the catalog", e)
                    if isinstance(e, CatalogUnavailable):  # a broken connection: the next open connects anew
                        with _lock:
                            _readers.pop((key, os.getpid()), None)
                        reader.close()
        cat = get_catalog(catalog, must_exist=True)  # a read: a mistyped catalog URL creates nothing
        return cat.get_dataset(name), cat.version(name, version)


def _reader(url: str) -> LiteCatalog | None:
    """This process's quick reader of ``url`` (None: it cannot serve that URL; see ``dal.catalog.lite.connect``); a
    forked child connects anew (a database connection is never shared with the parent). Connected outside the
    lock: a PostgreSQL server's refusal, waited out, holds up only the thread that met it."""
    key = (url, os.getpid())
    with _lock:
        if key in _readers:
            return _readers[key]
    from dal.catalog import lite

    reader = lite.connect(url, check=False)  # PostgreSQL: pin checks the catalog's revision in its one statement
    with _lock:
        kept = _readers.setdefault(key, reader)
    if reader is not None and kept is not reader:  # another thread connected first
        reader.close()
    return kept


@translating("writing {name}")
def write(
    data: Any,
    name: str,
    *,
    format: str = DEFAULT_FORMAT,
    partition_by: Sequence[str] | None = None,
    mode: WriteMode = "append",
    schema_mode: SchemaMode = None,
    time_column: str | None = None,
    time_partitions: TimePartitions | None = None,
    description: str | None = None,
    tags: Sequence[str] | None = None,
    path: str | None = None,
    schema: TensorSchema | None = None,
    compression: str = DEFAULT_COMPRESSION,
    target_file_size: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
    inputs: Sequence[Any] | None = None,
    track: bool = True,
    where: str | Expr | None = None,
    overwrite: Overwrite = "table",
) -> VersionInfo:
    """Write ``data`` as a new version of ``name`` and record it in the catalog.

    ``data`` is a Spark DataFrame (written by Spark's executors), a pandas DataFrame, or an Arrow
    table / record batch / reader. A new dataset lands at ``path`` or ``<DAL_WAREHOUSE>/<name>``.
    ``schema_mode='merge'`` adds new nullable columns (recorded as a schema-change version);
    ``schema_mode='overwrite'`` (with ``mode='overwrite'``) replaces the schema.
    ``format='petastorm'`` takes a ``TensorSchema`` (``schema=``; an existing dataset keeps its own) and
    data as a pandas DataFrame, a dict of columns or a list of row dicts holding NumPy arrays.
    ``compression`` is the Parquet codec of the new files: snappy (default), gzip, zstd, lz4, brotli or none.
    ``target_file_size`` (bytes, e.g. 128 MiB as ``dal optimize`` uses) is the file size a write aims for: a
    Spark DataFrame whose estimated size (Spark's plan statistics) fits in fewer files than it has partitions is
    coalesced to that many first (partitions are never added); delta-rs splits its files at it. Default None:
    the DataFrame's own partitioning (a coalesce also narrows the work upstream of the write to that many tasks,
    and Spark's estimate can be far below the real size, so it is not done unasked); ``dal optimize`` compacts
    small files after the fact.

    Time partitions (``dal.storage.timeparts``): when ``partition_by`` has a ``date``/``day``/``dt``/``ds`` column
    (and an ``hour`` one) and every row written has the day (hour) of ``time_column`` there, in UTC, the data's
    own time zone or the Spark session's, dal records that rule on the version and windows prune those
    partitions (appends keep it while every write keeps it). ``time_partitions=TimePartitions(day=…, hour=…,
    zone=…)`` declares the rule for the dataset instead: this write and later ones are refused when a row
    breaks it.
    ``inputs``: what the data was made from, recorded as the version's lineage exactly (``declared``):
    ``dal.Dataset`` handles, ``Scan``s (with their filters), ``VersionInfo``s, names (their latest version) or
    ``(name, version)`` pairs; ``[]`` records none. Without it, the versions this process read since its
    previous write are recorded (``inferred``; see ``dal.lineage``). ``track=False`` (dal's own scratch
    writes, e.g. ``dal.convert``'s cache): this write neither ends the process's window of reads nor emits an
    OpenLineage event.

    Replacing part of a dataset (``docs/changes.md``): with ``mode='overwrite'``, ``where="date >= '2026-01-03'
    AND date < '2026-01-05'"`` (SQL, or a ``dal.col`` expression) replaces the rows it matches by ``data`` and
    leaves every other row as it is; every row of ``data`` must match it (as Delta's ``replaceWhere``) or the
    write is refused before anything is written. ``overwrite='partitions'`` replaces exactly the partitions
    ``data`` has rows in (Spark's dynamic partition overwrite). One version, committed only if the version it
    read is still the newest (``WriteConflict`` otherwise); its lineage names that version's kept rows. Delta,
    Petastorm; local data or a Spark DataFrame (its executors check the rows, report the partitions written).

    Everything is validated — and the catalog asked whether this role may record versions — before
    any data is written; a write that fails before its storage commit leaves the table and the catalog
    as they were. A first write killed after its storage commit is recorded by the next write (or
    ``sync``, at the default location): the table carries this dataset's name in its first commit.

    Args:
        data: A pyarrow Table/RecordBatchReader, pandas DataFrame, dict of arrays or Spark DataFrame.
        name: The dataset's catalog name.
        format: ``delta`` or ``petastorm``.
        partition_by: Partition columns (a new dataset).
        mode: ``append`` or ``overwrite``.
        schema_mode: ``merge`` (add new columns) or ``overwrite`` (replace the schema); None: the schema must match.
        time_column: The column that orders rows in time.
        time_partitions: A time partition column's rule.
        description: What the dataset holds.
        tags: Tags for the new version.
        path: Where to store a new dataset (default: the warehouse).
        schema: A TensorSchema for tensor fields (petastorm).
        compression: Parquet codec.
        target_file_size: Bytes per data file to aim for (Spark: fewer tasks when the data is small).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).
        inputs: Upstream datasets, recorded as declared lineage.
        track: Record the read datasets of this process as inferred lineage.
        where: With ``mode='overwrite'``: replace only the rows this predicate matches.
        overwrite: ``'table'`` (default) or ``'partitions'``: replace only the partitions ``data`` holds.

    Raises:
        InvalidName: the name is not a dataset name.
        SchemaMismatch: the data does not fit the dataset's schema or the options (the message names the columns).
        TagExists: a tag of ``tags`` already names another version.
        DatasetExists: another dataset is recorded at ``path`` (two entries over one table).
        FormatError: the format refuses the data or the location.
        CatalogReadOnly: this role cannot record versions (nothing was written).
        CommittedNotRecorded: the data is committed in storage but the catalog could not record it (do not
            retry; ``dal sync`` records it).
        FilterError: ``where`` names an unknown column.
        WriteConflict: another commit landed after the version read (nothing was written).
        DalError: an input dal cannot write (a pandas column Arrow has no type for, N-D arrays of varying shapes).
    """
    request = refusals.arguments(
        refusals.WriteRequest(data, name, format, partition_by, mode, schema_mode, time_column, time_partitions,
                              description, tags, path, schema, compression, target_file_size, storage_options,
                              catalog, inputs, track, where, overwrite)
    )  # fmt: skip
    version = _run(refusals.plan(request, get_catalog(request.catalog)))  # every refusal, before anything is written
    assert version is not None
    return version


@translating("deleting rows of {name}")
def delete(
    name: str,
    where: str | Expr,
    *,
    description: str | None = None,
    tags: Sequence[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> VersionInfo:
    """Delete the rows ``where`` matches: a new version of ``name`` without them (older versions keep them until
    they expire: ``docs/changes.md`` shows how to make deleted rows unreadable everywhere and gone from storage).

    ``where`` is a SQL predicate or a ``dal.col`` expression, checked against the latest version's schema like
    every filter. The delete commits only if the latest version is still the newest in storage. A predicate no
    row matches writes nothing and returns the latest version. Files holding matching rows are rewritten without
    them (Delta: delta-rs's ``DELETE``; Petastorm: a new version directory, the other files carried as they are).

    Args:
        name: The dataset's catalog name.
        where: Which rows to delete.
        description: What the dataset holds (updated with the new version).
        tags: Tags for the new version.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        FilterError: the predicate names an unknown column or holds a bad literal.
        DalError: no version to delete from, or no predicate.
        ReadOnlyDataset: the dataset is registered read-only in this catalog.
        ClaimedElsewhere: another catalog owns the location.
        CatalogReadOnly: this role cannot record versions (nothing was written).
        WriteConflict: a commit landed after the latest version (nothing was committed).
        CommittedNotRecorded: the deletion is committed in storage but not recorded (``dal sync`` records it).
    """
    if where is None or (isinstance(where, str) and not where.strip()):
        raise DalError("dal.delete needs where= (a predicate): to delete every row, write an empty table")
    validate.check(description=description, tags=tags, storage_options=storage_options, catalog=catalog)
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    request = refusals.arguments(
        refusals.WriteRequest(None, name, info.format, None, "overwrite", None, None, None, description, tags, None,
                              None, DEFAULT_COMPRESSION, None, storage_options, catalog, [], True, where,
                              delete=True)
    )  # fmt: skip
    version = _run(refusals.plan(request, cat))
    if version is None:
        _log.info("%s: no row matches %s; nothing deleted", name, where if isinstance(where, str) else "where")
        return cat.version(name)
    return version


def _run(plan: refusals.PlannedWrite) -> VersionInfo | None:
    """Store and record a planned write (None: a delete that matched no row), with its OpenLineage run."""
    name, track = plan.request.name, plan.request.track
    run = openlineage.WriteRun(name, lineage.unique(plan.upstream)) if track else None
    if run is not None:
        run.start()  # queued for the sending thread: never waits for the consumer
    try:
        stored = commit.store(plan)
        version = None if stored is None else commit.record(plan, stored)
    except BaseException as e:
        if run is not None:
            run.fail(e)
        raise
    if version is None:
        return None
    if run is not None:
        run.complete(version)
    _log.info("committed %s as version %d (storage version %s)", name, version.number, version.storage_version)
    return version


@translating("registering {name} at {uri}")
def register(
    name: str,
    uri: str,
    *,
    format: str = DEFAULT_FORMAT,
    description: str = "",
    time_column: str | None = None,
    time_partitions: TimePartitions | None = None,
    partition_types: Mapping[str, str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
    read_only: bool = False,
) -> list[VersionInfo]:
    """Adopt an existing table: each of its storage versions becomes a catalog version. Returns them.

    A table's location belongs to one catalog (``dal.storage.claims``): registering claims it for this catalog,
    and a location another catalog claims is refused, naming that catalog. ``read_only=True`` registers it
    without claiming it, wherever it belongs: every version can be read (and ``sync`` records new ones), but
    this catalog never writes, optimizes, gc's or purges it — the way to share a table across catalogs or to
    move a team to a new catalog (then ``dal claim NAME --take-over`` moves the claim, logged).

    ``time_partitions`` declares how its ``date=`` (and ``hour=``) directories derive from ``time_column``
    (``dal.TimePartitions``): windows then skip the partitions outside them. Without it, windows filter rows
    (pushed down to row-group statistics) and never trust a directory name. ``partition_types`` gives the
    types of a plain Parquet directory's partition columns (e.g. ``{"date": "date32", "hour": "int32"}``,
    Arrow type names) where its files do not record them.

    Args:
        name: The new dataset's name.
        uri: Where the table is.
        format: ``delta``, ``petastorm`` or ``parquet``.
        description: What the dataset holds.
        time_column: The column that orders rows in time.
        time_partitions: How a time partition column derives from the time column.
        partition_types: Types of partition columns, by name.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).
        read_only: Register without claiming the location: read, never write or delete.

    Raises:
        FormatError: no table of that format at ``uri``. DatasetExists: the name (or, unless ``read_only``, the
        location) is taken. ClaimedElsewhere: another catalog owns the location (register it ``read_only``).
        SchemaMismatch: the time column or a time partition is not a column (partition) of the table.
    """
    properties = _register_properties(name, uri, format=format, description=description, time_column=time_column,
                                      time_partitions=time_partitions, partition_types=partition_types,
                                      storage_options=storage_options, catalog=catalog, read_only=read_only)  # fmt: skip
    cat = get_catalog(catalog)
    fmt = get_format(format)
    location = uris.normalize(uri)
    options = credentials.write_options(cat, name, location, storage_options or {}, read_only=read_only)
    uris.check_credentials(location, options)  # gs:// without any credentials: at once, not after minutes
    if not fmt.exists(location, options):
        raise FormatError(f"no {format} table at {location}")
    loc = Location.of(location, options)
    if read_only and fmt.writable:
        claims.read(loc)  # a bad claim file: refused before anything (the check below does not read it)
    # the claim there before (a bad claim file: refused before anything)
    claimed_before = check_claim(cat, name, fmt, location, options, "register", recorded=False, read_only=read_only,
                                 take=False).claim  # fmt: skip
    # two entries of one catalog over one location would both write and gc it (read-only ones only read)
    recorded = fmt.described(location, options)  # what a table dal wrote records about itself: arguments win
    description, time_column = description or recorded.description or "", time_column or recorded.time_column
    cat.create_dataset(name, format=format, location=location, description=description, time_column=time_column,
                       properties=properties, unique_location=fmt.writable and not read_only)  # fmt: skip
    try:
        check_claim(cat, name, fmt, location, options, "register", recorded=True, read_only=read_only)
        # the declared time partitions describe the table as it is: its commits are the ones the caller declares
        versions = recorded.tag(cat, name, sync_dataset(name, options, cat, adopt=False, registering=True))
        _check_registered(versions, location, time_column, time_partitions)
    except BaseException:
        cat.delete_dataset(name)  # leave the catalog (and the location) as they were
        if claimed_before is None and not read_only and fmt.writable:
            claims.release(loc, claims.Holder(cat.catalog_id, cat.display, name))
        raise
    return versions


def _register_properties(
    name: str,
    uri: str,
    *,
    format: str,
    description: str,
    time_column: str | None,
    time_partitions: TimePartitions | None,
    partition_types: Mapping[str, str] | None,
    storage_options: Mapping[str, str] | None,
    catalog: CatalogLike,
    read_only: bool,
) -> dict[str, Any]:
    """``register``'s arguments checked, before the catalog is opened: the new dataset's properties.

    Raises:
        InvalidName, DalError: the first bad argument, by name.
    """
    validate.check(uri=uri, format=format, description=description, time_column=time_column,
                   storage_options=storage_options, catalog=catalog)  # fmt: skip
    timeparts.check(time_partitions)
    validate_name(name)
    if time_partitions is not None and time_column is None:
        raise DalError("time_partitions derive from the time column: pass time_column= too")
    properties: dict[str, Any] = {}
    if time_partitions is not None and time_column is not None:
        properties[timeparts.DATASET_KEY] = time_partitions.of(time_column).to_json()
    if partition_types is not None:
        properties[PARTITION_TYPES_KEY] = check_partition_types(partition_types)
    if not isinstance(read_only, bool):
        raise DalError(f"read_only must be True or False, not {read_only!r}")
    if read_only:
        properties[claims.READ_ONLY] = True
    return properties


def _check_registered(
    versions: Sequence[VersionInfo], location: str, time_column: str | None, time_partitions: TimePartitions | None
) -> None:
    """Refuse a time column or time partitions the registered table's newest version does not have.

    Raises:
        SchemaMismatch: naming the column or partitions.
    """
    if time_column is not None and versions and time_column not in versions[-1].schema.names:
        raise SchemaMismatch(f"time_column {time_column!r} is not a column of {location}")
    if time_partitions is not None and versions:
        missing = [p for p in time_partitions.partitions if p not in versions[-1].partition_columns]
        if missing:
            raise SchemaMismatch(
                f"time_partitions name {', '.join(map(repr, missing))}, not a partition column of {location} "
                f"(its partition columns: {', '.join(versions[-1].partition_columns) or 'none'})"
            )


@translating("syncing {name}")
def sync(
    name: str, *, storage_options: Mapping[str, str] | None = None, catalog: CatalogLike = None
) -> list[VersionInfo]:
    """Record the storage versions committed since the catalog last looked (by dal or any other tool).

    Concurrent syncs are safe: a version recorded by another process meanwhile is skipped.
    A dataset not in the catalog whose first write was stopped before it was recorded (a table at its
    default location whose first commit names it) is recorded now.
    Returns the versions this call recorded, oldest first.

    Args:
        name: The dataset's catalog name.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no such dataset.
        DalError: the table cannot be read (nothing recorded).
    """
    validate.check(storage_options=storage_options, catalog=catalog)
    cat = get_catalog(catalog)  # through dal serve: WRITE, and the storage credentials it vends for the write
    return sync_dataset(name, credentials.write_options(cat, name, None, storage_options or {}), cat, adopt=True,
                        registering=False)  # fmt: skip


def sync_recorded(name: str, storage_options: Mapping[str, str], cat: Catalog) -> list[VersionInfo]:
    """``sync`` of a dataset the catalog records, never adopting a table at its default location (a rewrite's
    recording after a drop must not bring the dataset back).

    Raises:
        DatasetNotFound: no such dataset (now). DalError: as ``sync``.
    """
    return sync_dataset(name, dict(storage_options), cat, adopt=False, registering=False)
