"""The public functions: open, write, register, sync; the default catalog from ``$DAL_CATALOG_URL``.

Why one module: the public functions, mostly their docstrings and argument checks; ``write``'s steps are
separate helpers (check, target, record, tag).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from dal import lineage, openlineage, progress, validate
from dal._testhooks import pause
from dal.catalog import (
    CatalogReadOnly,
    CatalogUnavailable,
    CommittedNotRecorded,
    DatasetInfo,
    DatasetNotFound,
    VersionConflict,
    VersionInfo,
    VersionRef,
    default_url,
    remote,
    retry,
)
from dal.catalog.types import DECLARED, Input, validate_name, validate_tag
from dal.dataset import Dataset
from dal.errors import DalError, DatasetExists, FormatError, SchemaMismatch, TagExists, translating
from dal.formats.base import (
    DEFAULT_COMPRESSION,
    DEFAULT_FORMAT,
    WRITER_CATALOG,
    Format,
    SchemaMode,
    WriteMode,
    WriteOptions,
    WriteTransaction,
    check_compression,
    commit_metadata,
)
from dal.formats.described import stamp
from dal.formats.inputs import is_spark_dataframe
from dal.formats.registry import detect, get_format
from dal.storage import claims, intents, timeparts, uris
from dal.storage.location import Location
from dal.storage.partitions import PARTITION_TYPES_KEY, check_partition_types, declared_types
from dal.storage.timeparts import TimePartitions
from dal.tensors.schema import TensorSchema

if TYPE_CHECKING:
    from dal.catalog import Catalog
    from dal.catalog.lite import LiteCatalog

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
    key = catalog or default_url()
    if remote.is_remote(key):  # a dal serve catalog: reads only (dal.open goes through _pin)
        raise remote.not_supported(key)
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
    if file_cache is not None:
        from dal.storage.rangecache import ReadOptions

        return Dataset(info, pinned, ReadOptions.of(storage_options, file_cache))
    return Dataset(info, pinned, dict(storage_options or {}))


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
        if catalog is None or isinstance(catalog, str):
            key = catalog or default_url()
            if remote.is_remote(key):  # a dal serve catalog: the server resolves, checks the grant, audits
                return remote.client(key).pin(name, version)
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

    Raises:
        InvalidName: the name is not a dataset name.
        SchemaMismatch: the data does not fit the dataset's schema or the options (the message names the columns).
        TagExists: a tag of ``tags`` already names another version.
        DatasetExists: another dataset is recorded at ``path`` (two entries over one table).
        FormatError: the format refuses the data or the location.
        CatalogReadOnly: this role cannot record versions (nothing was written).
        CommittedNotRecorded: the data is committed in storage but the catalog could not record it (do not
            retry; ``dal sync`` records it).
        DalError: an input dal cannot write (a pandas column Arrow has no type for, N-D arrays of varying shapes).
    """
    request = _WriteRequest(data, name, format, partition_by, mode, schema_mode, time_column, time_partitions,
                            description, tags, path, schema, compression, target_file_size, storage_options,
                            catalog, inputs, track).checked()  # fmt: skip
    plan = _plan_write(request)
    run = openlineage.WriteRun(name, lineage.unique(plan.upstream)) if track else None
    if run is not None:
        run.start()  # queued for the sending thread: never waits for the consumer
    try:
        version = _record_write(plan, _commit_write(plan))
    except BaseException as e:
        if run is not None:
            run.fail(e)
        raise
    if run is not None:
        run.complete(version)
    _log.info("committed %s as version %d (storage version %s)", name, version.number, version.storage_version)
    return version


@dataclass(frozen=True)
class _WriteRequest:
    """``dal.write``'s arguments as one value; ``checked()`` validates them all before the catalog is opened."""

    data: Any
    name: str
    format: str
    partition_by: Sequence[str] | None
    mode: WriteMode
    schema_mode: SchemaMode
    time_column: str | None
    time_partitions: TimePartitions | None
    description: str | None
    tags: Sequence[str] | None
    path: str | None
    schema: TensorSchema | None
    compression: str
    target_file_size: int | None
    storage_options: Mapping[str, str] | None
    catalog: CatalogLike
    inputs: Sequence[Any] | None
    track: bool

    def checked(self) -> _WriteRequest:
        """This request with its compression as a codec and its tags checked.

        Raises:
            InvalidName, DalError: the first bad argument, by name.
        """
        validate.check(partition_by=self.partition_by, tags=self.tags, format=self.format,
                       description=self.description, time_column=self.time_column, path=self.path,
                       storage_options=self.storage_options, catalog=self.catalog)  # fmt: skip
        if self.schema is not None and not isinstance(self.schema, TensorSchema):
            raise DalError(f"schema must be a dal.TensorSchema (or None), not {type(self.schema).__name__}")
        timeparts.check(self.time_partitions)
        size = None if self.target_file_size is None else validate.file_size(self.target_file_size)
        codec, tags = _check_write(self.data, self.name, self.mode, self.schema_mode, self.compression, self.tags)
        return replace(self, compression=codec, tags=tags, target_file_size=size)


@dataclass(frozen=True)
class _PlannedWrite:
    """A checked write with everything settled before storage is touched: the catalog, where it writes, the
    format's open transaction, and the lineage it will record."""

    request: _WriteRequest
    cat: Catalog
    fmt: Format
    options: dict[str, str]
    existing: DatasetInfo | None
    location: str
    rule: TimePartitions | None
    create: Callable[[], None]
    opts: WriteOptions
    txn: WriteTransaction
    upstream: list[Input]
    produced_by: dict[str, Any]
    reads_done: Callable[[], None]  # ends this process's window of reads (inferred lineage) once committed


def _plan_write(req: _WriteRequest) -> _PlannedWrite:
    """Open the catalog, find or adopt the target, begin the format's transaction and check the rows a declared
    time-partition rule can see now: every refusal comes here, before anything is written.

    Raises:
        DatasetExists, TagExists, SchemaMismatch, CatalogReadOnly, DalError (see ``write``).
    """
    cat = get_catalog(req.catalog)
    declared = req.inputs if req.inputs is not None else lineage.declared()
    declared_inputs = None if declared is None else _declared_inputs(declared, cat)
    fmt = get_format(req.format)
    options = dict(req.storage_options or {})
    tags = tuple(req.tags or ())
    existing, location, rule, create = _target(cat, req.name, req.format, fmt, options, path=req.path, tags=tags,
                                               description=req.description, time_column=req.time_column,
                                               time_partitions=req.time_partitions)  # fmt: skip
    cat.check_writable()  # before anything reaches storage: a commit nobody may record helps no one
    # the location is this catalog's (or nobody's: claimed once the write begins), and no purge of it was
    # stopped half-way
    check_claim(cat, req.name, fmt, location, options, "write", recorded=existing is not None,
                read_only=is_read_only(existing), take=False)  # fmt: skip

    schema = req.schema
    new = existing is None or existing.latest_version is None
    inferred = schema is None and fmt.needs_tensor_schema and is_spark_dataframe(req.data)
    inferred = inferred and (new or req.schema_mode is not None)
    if inferred:
        from dal.spark.frames import infer_tensor_schema  # a new dataset or schema: codecs/shapes from the data

        schema = infer_tensor_schema(req.data)
    opts = WriteOptions(
        mode=req.mode,
        partition_by=None if req.partition_by is None else tuple(req.partition_by),  # None: as the table is
        schema_mode=req.schema_mode,
        storage_options=options,
        commit_metadata=commit_metadata(
            uuid.uuid4().hex, req.name, cat.catalog_id, stamp(existing, req.time_column, req.description, tags)
        ),
        tensor_schema=schema,
        tensor_schema_inferred=inferred,
        time_column=req.time_column,
        compression=req.compression,
        target_file_size=req.target_file_size,
    )
    latest = cat.version(existing.name) if existing is not None and existing.latest_version is not None else None
    txn = fmt.begin(location, opts, latest)  # refuses options that do not fit, before anything is written
    txn.observer = _rule_check(req.data, opts, latest, rule, existing)
    _check_in_memory(req.data, txn.observer)  # a declared rule a row breaks: refused before anything is written
    reads, window, mark = lineage.inferred()  # the reads since the previous write
    upstream = declared_inputs if declared_inputs is not None else reads
    produced_by = lineage.collect(req.data, spark=is_spark_dataframe(req.data), upstream=upstream)
    return _PlannedWrite(req, cat, fmt, options, existing, location, rule, create, opts, txn, upstream, produced_by,
                         functools.partial(lineage.done, window, mark))  # fmt: skip


def _commit_write(plan: _PlannedWrite) -> int:
    """Write the rows and commit them in storage (Spark's executors for a Spark DataFrame); the storage version.

    A write in flight is registered before anything is staged: gc and purge leave its files alone.
    """
    data, name = plan.request.data, plan.request.name
    loc = Location.of(plan.location, plan.options)
    with intents.registered(loc, plan.opts.write_id, name):
        pause("intent-registered")
        # claimed with the intent registered: a purge marks the claim, then looks for intents; one of the two
        # sees the other, so a write never commits into a location being purged
        fresh = plan.fmt.writable and plan.existing is None and claims.read(loc) is None
        check_claim(plan.cat, name, plan.fmt, plan.location, plan.options, "write",
                    recorded=plan.existing is not None, read_only=is_read_only(plan.existing))  # fmt: skip
        try:
            with progress.task(f"writing {name}", total=progress.rows_of(data)):  # a line on a terminal only
                if is_spark_dataframe(data):
                    from dal.spark.write import write_dataframe

                    storage_version = write_dataframe(data, plan.fmt, plan.txn)
                else:
                    storage_version = plan.txn.write(data)
        except BaseException:
            if fresh and not plan.fmt.exists(plan.location, plan.options):  # a refused first write leaves nothing
                claims.release(loc, claims.Holder(plan.cat.catalog_id, plan.cat.display, name))
            raise
    pause("after-storage-commit")
    return storage_version


def _record_write(plan: _PlannedWrite, storage_version: int) -> VersionInfo:
    """Record a committed write: the version (and anything other writers committed before it), its lineage, the
    time-partition rule its rows kept, its tags.

    Raises:
        CommittedNotRecorded: the rows are stored, and a retry would store them twice. TagExists (and the
            catalog's errors) from tagging, saying the data is recorded.
    """
    req, cat = plan.request, plan.cat
    version = _record(cat, req.name, req.format, plan.location, plan.options, storage_version, plan.existing,
                      plan.create, description=req.description, time_column=req.time_column,
                      time_partitions=req.time_partitions, rule=plan.rule)  # fmt: skip
    if req.track:
        plan.reads_done()  # committed: the next write's inferred inputs start after this one
    try:  # only the version this write committed (not others' commits that sync recorded with it)
        version = cat.record_lineage(req.name, version.number, lineage.KEY, plan.produced_by,
                                     lineage.unique(plan.upstream))  # fmt: skip
    except DalError as e:  # recorded already: a lineage the catalog refused must not fail the write
        _log.warning("%s version %d: lineage not recorded (%s)", req.name, version.number, e)
    pause("version-recorded")
    try:
        version = _record_rule(cat, version, plan.txn.observer, req.mode)
    except DalError as e:  # a rule not recorded only means windows do not prune this version's partitions
        _log.warning("%s version %d: time partitions not recorded (%s)", req.name, version.number, e)
    return _tag_written(cat, req.name, plan.location, version, tuple(req.tags or ()))


def _check_write(
    data: Any, name: str, mode: str, schema_mode: SchemaMode, compression: str, tags: Sequence[str] | None
) -> tuple[str, tuple[str, ...]]:
    """``dal.write``'s own argument checks, before the catalog is opened: returns the compression codec and the
    checked tags.

    Raises:
        InvalidName, DalError: a bad name, mode, schema mode, compression or tag, or a streaming DataFrame.
    """
    validate_name(name)
    if mode not in ("append", "overwrite"):
        raise DalError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    if is_spark_dataframe(data):
        from dal.spark.write import check_frame

        check_frame(data)  # a streaming DataFrame is refused before anything runs
    codec = check_compression(compression)
    if schema_mode not in (None, "merge", "overwrite"):
        raise DalError(f"schema_mode must be None, 'merge' or 'overwrite', not {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise DalError("schema_mode='overwrite' replaces the schema and needs mode='overwrite'")
    return codec, tuple(validate_tag(t) for t in (tags or ()))


def _target(
    cat: Catalog,
    name: str,
    format: str,
    fmt: Format,
    options: dict[str, str],
    *,
    path: str | None,
    tags: tuple[str, ...],
    description: str | None,
    time_column: str | None,
    time_partitions: TimePartitions | None,
) -> tuple[DatasetInfo | None, str, TimePartitions | None, Callable[[], None]]:
    """Where ``dal.write`` writes: the dataset (None for a new one), its location, its declared time-partition
    rule, and how to create it in the catalog once the data is committed. A first write that committed but was
    not recorded is adopted here (recorded, then written on top of).

    Raises:
        DatasetExists: a table of another dataset is at the location. TagExists: a tag is taken.
        DalError: another format, or another location than the dataset's.
    """

    def create() -> None:
        cat.create_dataset(name, format=format, location=location, description=description or "",
                           time_column=time_column, exist_ok=True, unique_location=True)  # fmt: skip
        if rule is not None:
            cat.update_dataset(name, properties={timeparts.DATASET_KEY: rule.to_json()})

    try:
        existing = cat.get_dataset(name)
    except DatasetNotFound:
        existing = None
    rule = _declared_rule(time_partitions, time_column, existing)
    if existing is None:
        location = uris.normalize(path) if path else uris.default_location(name)
        uris.check_credentials(location, options)
        # another catalog's location is refused before anything else is looked at (nothing is claimed yet)
        check_claim(cat, name, fmt, location, options, "write", recorded=False, take=False)

        if fmt.exists(location, options):
            if fmt.written_for(location, options) != name:
                raise DatasetExists(
                    f"a {format} table already exists at {location} but is not in the catalog; "
                    f"adopt it first with dal.register({name!r}, {location!r})"
                )
            # a first write of this dataset committed there and was not recorded (killed, or racing this
            # one): record it now, then write on top of it like any later write, with its checks
            cat.check_writable()
            check_claim(cat, name, fmt, location, options, "write", recorded=False)
            create()
            sync(name, storage_options=options, catalog=cat)
            existing = cat.get_dataset(name)
    if existing is not None:
        if existing.format != format:
            raise DalError(f"{name} is a {existing.format} dataset; cannot write format={format!r} to it")
        if path is not None and uris.normalize(path) != existing.location:
            raise DalError(f"{name} lives at {existing.location}, not {uris.normalize(path)}")
        location = existing.location
        taken = sorted(set(cat.tags(name)) & set(tags))
        if taken:
            raise TagExists(f"{name}: tag(s) {', '.join(taken)} exist already; move them with dal tag --force")
    return existing, location, rule, create


def _record(
    cat: Catalog,
    name: str,
    format: str,
    location: str,
    options: dict[str, str],
    storage_version: int,
    existing: DatasetInfo | None,
    create: Callable[[], None],
    *,
    description: str | None,
    time_column: str | None,
    time_partitions: TimePartitions | None,
    rule: TimePartitions | None,
) -> VersionInfo:
    """Record a committed write in the catalog (creating a new dataset, updating what the write changed) and
    return the version that holds ``storage_version``.

    Raises:
        CommittedNotRecorded: any failure (the rows are stored: a retry would store them twice).
    """
    try:
        if existing is None:
            create()
        else:
            current = cat.get_dataset(name)  # renamed or dropped while this write ran: not recorded under it
            if current.location != location:
                raise DalError(f"{name} is now the dataset at {current.location}, not {location}")
            if description is not None or time_column is not None or time_partitions is not None:
                props = {timeparts.DATASET_KEY: rule.to_json()} if time_partitions is not None and rule else None
                cat.update_dataset(name, description=description, time_column=time_column, properties=props)
        recorded = sync(name, storage_options=options, catalog=cat)
        version = next((v for v in recorded if v.storage_version == storage_version), None)
        if version is None:  # recorded meanwhile by a concurrent writer's sync
            version = next((v for v in cat.versions(name) if v.storage_version == storage_version), None)
        if version is None:
            raise FormatError(f"storage version {storage_version} is not among the versions sync found")
    except Exception as e:
        raise not_recorded(cat, name, format, location, storage_version, e, first=existing is None) from e
    return version


def _tag_written(cat: Catalog, name: str, location: str, version: VersionInfo, tags: Sequence[str]) -> VersionInfo:
    """Tag the version a write recorded.

    Raises:
        TagExists, CatalogUnavailable, CatalogReadOnly, DalError: tagging failed; the message says the data is
            recorded and must not be written again.
    """
    try:
        for t in tags:
            version = cat.tag(name, version.number, t)
    except Exception as e:  # recorded: a retry would duplicate the rows
        kind = type(e) if isinstance(e, TagExists | CatalogUnavailable | CatalogReadOnly) else DalError
        raise kind(
            f"{name}: the data was written and recorded as version {version.number}, but tagging it failed "
            f"({_first_line(e)}); do NOT retry the write: tag it with `dal tag {_holder(cat, name, location)} "
            f"{version.number} TAG`"
        ) from e
    return version


def _declared_inputs(items: Any, cat: Catalog) -> list[Input]:
    """``dal.write(inputs=...)`` as lineage inputs, each checked (names and versions resolved in ``cat``)
    before anything is written.

    Raises:
        DalError: not a list of inputs, or an item of another kind; DatasetNotFound / VersionNotFound.
    """
    from dal.expr import to_sql
    from dal.scan import Scan

    if isinstance(items, str | bytes | Mapping | Scan | Dataset | VersionInfo) or not isinstance(
        items, Sequence | set | frozenset
    ):
        raise DalError(f"inputs must be a list of datasets, scans, versions or names, not {type(items).__name__}")
    out = []
    for item in items:
        if isinstance(item, Scan):
            condition = item.condition
            text = None if condition is None else to_sql(condition)
            out.append(Input(item.dataset.name, item.dataset.number, text, DECLARED))
        elif isinstance(item, Dataset):
            out.append(Input(item.name, item.number, None, DECLARED))
        elif isinstance(item, VersionInfo):
            out.append(Input(item.dataset, item.number, None, DECLARED))
        elif isinstance(item, str):
            out.append(Input(item, cat.version(item).number, None, DECLARED))
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            out.append(Input(item[0], cat.version(item[0], item[1]).number, None, DECLARED))
        else:
            raise DalError(
                f"inputs: {type(item).__name__} is not a dataset, scan, version, name or (name, version) pair"
            )
    return out


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
) -> None:
    """Refuse ``action`` on ``location`` unless this catalog owns it (claiming it when nobody does): see
    ``dal.storage.claims``. Formats dal never writes (plain Parquet) are never claimed: dal writes nothing there.

    Raises:
        ClaimedElsewhere, ReadOnlyDataset, PurgeUnfinished, FormatError: as ``claims.check``.
    """
    if not fmt.writable:
        return
    holder = claims.Holder(cat.catalog_id, cat.display, name)
    claims.check(Location.of(location, options), holder, action, recorded=recorded, read_only=read_only, take=take)


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _holder(cat: Catalog, name: str, location: str) -> str:
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


def _declared_rule(
    time_partitions: TimePartitions | None, time_column: str | None, existing: DatasetInfo | None
) -> TimePartitions | None:
    """The time-partition rule this write must keep: the one it declares, else the dataset's (for its time column)."""
    column = time_column or (existing.time_column if existing is not None else None)
    if time_partitions is not None:
        if column is None:
            raise DalError("time_partitions derive from the time column: pass time_column= too")
        return time_partitions.of(column)
    if existing is None or column is None:
        return None
    rule = timeparts.TimePartitions.from_json(existing.properties.get(timeparts.DATASET_KEY))
    return rule if rule is not None and rule.column == column else None


def _rule_check(
    data: Any,
    opts: WriteOptions,
    latest: VersionInfo | None,
    declared: TimePartitions | None,
    existing: DatasetInfo | None,
) -> timeparts.RuleCheck | None:
    """What the write checks of its rows while writing them: the declared time-partition rule (a row that breaks
    it fails the write), else the rules it might prove (``dal.storage.timeparts.candidates``)."""
    column = opts.time_column or (existing.time_column if existing is not None else None)
    # without partition_by a write keeps the table's partitioning (``txn.partition_columns`` is settled only
    # once the data's schema is checked); the version made is checked against the rule before it is recorded
    parts = opts.partition_by or (latest.partition_columns if latest is not None else ())
    if declared is not None:
        missing = [c for c in declared.partitions if c not in parts]
        if missing:
            raise SchemaMismatch(
                f"time_partitions name {', '.join(map(repr, missing))}, which the write does not partition by "
                f"(partition_by={list(parts)})"
            )
        return timeparts.RuleCheck([declared], declared=True)
    if column is None:
        return None
    rules = timeparts.candidates(column, parts, [*_data_zones(data, column), "UTC"])
    return timeparts.RuleCheck(rules) if rules else None


def _check_in_memory(data: Any, check: timeparts.RuleCheck | None) -> None:
    """Check an in-memory input (pandas, Arrow) against a declared rule now, reading only the rule's columns;
    streams and Spark DataFrames are checked as they are written (a refusal then comes before the commit)."""
    if check is None or not check.declared:
        return
    rule = check.rules[0]
    columns = [c for c in (rule.column, *rule.partitions) if c is not None]
    if isinstance(data, pa.Table | pa.RecordBatch) and all(c in data.schema.names for c in columns):
        check.see(data.select(columns))
    elif type(data).__module__.partition(".")[0] == "pandas" and all(
        c in getattr(data, "columns", ()) for c in columns
    ):
        check.see(pa.Table.from_pandas(data[columns], preserve_index=False))


def _data_zones(data: Any, column: str) -> list[str]:
    """The time zones the data's own days may be cut in: the time column's zone, the Spark session's."""
    if is_spark_dataframe(data):
        try:
            return [str(data.sparkSession.conf.get("spark.sql.session.timeZone"))]
        except Exception:  # Spark Connect without the conf: UTC only
            return []
    schema = getattr(data, "schema", None)
    if isinstance(schema, pa.Schema) and column in schema.names:
        typ = schema.field(column).type
        return [typ.tz] if pa.types.is_timestamp(typ) and typ.tz else []
    dtype = getattr(getattr(data, "dtypes", {}), "get", lambda _c: None)(column)  # pandas
    tz = getattr(dtype, "tz", None)
    return [str(tz)] if tz is not None else []


def _record_rule(cat: Catalog, version: VersionInfo, check: timeparts.RuleCheck | None, mode: str) -> VersionInfo:
    """Record the time-partition rule every row of ``version`` keeps: this write's rows kept it, and the version
    it extends (an append) has it recorded. A declared rule is the dataset's; nothing to record per version."""
    rule = check.proven() if check is not None and not check.declared else None
    if rule is None:
        return version
    if mode == "append" and version.number > 0:
        before = cat.version(version.dataset, version.number - 1)
        if timeparts.TimePartitions.from_json(before.properties.get(timeparts.VERSION_KEY)) != rule:
            return version  # rows dal did not check (or checked against another rule) are in this version too
    if any(p not in version.partition_columns for p in rule.partitions):
        return version
    return cat.annotate_version(version.dataset, version.number, timeparts.VERSION_KEY, rule.to_json())


def not_recorded(
    cat: Catalog, name: str, format: str, location: str, storage_version: int, e: BaseException, *, first: bool
) -> CommittedNotRecorded:
    reason = _first_line(e)
    holder = _holder(cat, name, location)
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
    cat = get_catalog(catalog)
    fmt = get_format(format)
    location = uris.normalize(uri)
    options = dict(storage_options or {})
    uris.check_credentials(location, options)  # gs:// without any credentials: at once, not after minutes
    if not fmt.exists(location, options):
        raise FormatError(f"no {format} table at {location}")
    loc = Location.of(location, options)
    claimed_before = claims.read(loc) if fmt.writable else None  # a bad claim file: refused before anything
    check_claim(cat, name, fmt, location, options, "register", recorded=False, read_only=read_only, take=False)
    # two entries of one catalog over one location would both write and gc it (read-only ones only read)
    recorded = fmt.described(location, options)  # what a table dal wrote records about itself: arguments win
    description, time_column = description or recorded.description or "", time_column or recorded.time_column
    cat.create_dataset(name, format=format, location=location, description=description, time_column=time_column,
                       properties=properties, unique_location=fmt.writable and not read_only)  # fmt: skip
    try:
        check_claim(cat, name, fmt, location, options, "register", recorded=True, read_only=read_only)
        # the declared time partitions describe the table as it is: its commits are the ones the caller declares
        versions = recorded.tag(cat, name, _sync(name, options, cat, adopt=False, registering=True))
        if time_column is not None and versions and time_column not in versions[-1].schema.names:
            raise SchemaMismatch(f"time_column {time_column!r} is not a column of {location}")
        if time_partitions is not None and versions:
            missing = [p for p in time_partitions.partitions if p not in versions[-1].partition_columns]
            if missing:
                raise SchemaMismatch(
                    f"time_partitions name {', '.join(map(repr, missing))}, not a partition column of {location} "
                    f"(its partition columns: {', '.join(versions[-1].partition_columns) or 'none'})"
                )
    except BaseException:
        cat.delete_dataset(name)  # leave the catalog (and the location) as they were
        if claimed_before is None and not read_only and fmt.writable:
            claims.release(loc, claims.Holder(cat.catalog_id, cat.display, name))
        raise
    return versions


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
    return _sync(name, dict(storage_options or {}), get_catalog(catalog), adopt=True, registering=False)


def sync_recorded(name: str, storage_options: Mapping[str, str], cat: Catalog) -> list[VersionInfo]:
    """``sync`` of a dataset the catalog records, never adopting a table at its default location (a rewrite's
    recording after a drop must not bring the dataset back).

    Raises:
        DatasetNotFound: no such dataset (now). DalError: as ``sync``.
    """
    return _sync(name, dict(storage_options), cat, adopt=False, registering=False)


def _sync(
    name: str, storage_options: dict[str, str], cat: Catalog, *, adopt: bool, registering: bool
) -> list[VersionInfo]:
    try:
        info = cat.get_dataset(name)
    except DatasetNotFound:
        adopted = _adopt_unrecorded(cat, name, storage_options) if adopt else None
        if adopted is None:
            raise
        info = adopted
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
        )
    except FormatError as e:  # the format knows the location only: name the dataset too
        raise type(e)(f"{name}: {e}") from e
    out: list[VersionInfo] = []
    unchecked: list[VersionInfo] = []  # rows no write of this catalog checked against its declared rule
    mine = cat.catalog_id
    for draft in progress.each(drafts, f"recording versions of {name}", unit="versions"):  # a line on a terminal
        writer = draft.properties.get(WRITER_CATALOG)
        foreign = not read_only and isinstance(writer, str) and writer != mine
        if foreign:  # recorded, and said: its rows were written for another catalog, not by this one's writers
            draft = replace(draft, properties={**draft.properties, claims.FOREIGN: True})
        try:
            version = cat.publish(name, draft)
        except VersionConflict:
            continue  # another process recorded this storage version first
        if foreign:
            _log.warning(
                "%s: version %d (storage version %s) was committed by a writer of another catalog (id %s), not "
                "this one; recorded and marked foreign (`dal versions` shows it)", name, version.number,
                draft.storage_version, writer,
            )  # fmt: skip
        if writer != mine and not registering:
            unchecked.append(version)
        out.append(version)
    _drop_unchecked_rule(cat, info, unchecked)
    newest = out[-1] if out else None
    lost = info.time_column is not None and newest is not None and newest.unavailable is None
    if lost and newest is not None and info.time_column not in newest.schema.names:
        # a schema overwrite dropped the time column: no dangling name (windows would fail on it), and no
        # declared time partitions of it
        _log.warning("%s: version %d has no column %r: the dataset has no time column any more (set another "
                     "with time_column= or `dal set --time-column`)", name, newest.number, info.time_column)  # fmt: skip
        cat.update_dataset(name, clear_time_column=True, properties={timeparts.DATASET_KEY: None})
    return out


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


def _adopt_unrecorded(cat: Catalog, name: str, options: Mapping[str, str]) -> Any:
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
