"""The Format interface each storage format implements, its write transaction, and the registry of formats."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pyarrow as pa

from dal.catalog.types import Partition, Schema, VersionDraft, VersionInfo
from dal.errors import DalError, FormatError, SchemaMismatch
from dal.formats.described import Described
from dal.formats.names import DEFAULT_FORMAT as DEFAULT_FORMAT  # re-exported: what dal.write/register use
from dal.storage.timeparts import RuleCheck
from dal.tensors.schema import TensorSchema

if TYPE_CHECKING:
    from dal.expr import Expr
    from dal.formats.changes import ChangePlan
    from dal.formats.index import FileIndex

WriteMode = Literal["append", "overwrite"]
SchemaMode = Literal["merge", "overwrite"] | None
# the catalog name a write is for, in its commit: a first write killed before the catalog recorded it is
# adopted by the next write (or sync) of that name
DATASET_KEY = "dal.dataset"
WRITE_ID_KEY = "dal.write_id"
CATALOG_KEY = "dal.catalog"  # the id of the catalog the write was for (``dal.storage.claims``)
# a version property: the id of the catalog whose dal wrote the storage version (from its commit); absent when
# another tool (or a dal before catalog ids) committed it
WRITER_CATALOG = "writer_catalog"
# Parquet codecs a write may ask for (pyarrow's names; "uncompressed" is an alias of "none")
COMPRESSIONS = ("snappy", "gzip", "zstd", "lz4", "brotli", "none")
DEFAULT_COMPRESSION = "snappy"


def check_compression(value: object) -> str:
    """The Parquet codec ``value`` names (case-insensitive; "uncompressed" is "none").

    Raises:
        DalError: not one of ``COMPRESSIONS`` (the message lists them).
    """
    codec = value.lower() if isinstance(value, str) else None
    codec = "none" if codec == "uncompressed" else codec
    if codec not in COMPRESSIONS:
        raise DalError(f"compression must be one of {', '.join(COMPRESSIONS)} (or 'uncompressed'), not {value!r}")
    return codec


TARGET_FILE_SIZE = 128 * 1024 * 1024  # bytes per data file that dal optimize and writes aim for


@dataclass(frozen=True)
class WriteOptions:
    """How to write: validated by ``dal.api`` before a format sees them."""

    mode: WriteMode = "append"
    # None: as the table is partitioned (a new table: not at all); () asks for no partitioning
    partition_by: tuple[str, ...] | None = None
    schema_mode: SchemaMode = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    tensor_schema: TensorSchema | None = None  # codecs and shapes of tensor fields (formats that store them)
    tensor_schema_inferred: bool = False  # tensor_schema was inferred from the data, not given by the caller
    time_column: str | None = None
    compression: str = DEFAULT_COMPRESSION  # Parquet codec of the data files (one of COMPRESSIONS)
    # bytes per data file to aim for (Spark: fewer tasks; delta-rs: its own); None: the writer's own sizes (Spark:
    # one file set per partition, as the DataFrame is partitioned)
    target_file_size: int | None = None
    # the rows an overwrite replaces (``dal.writes.changes``), bound against the version it read; None: the table
    where: Expr | None = None
    # overwrite='partitions' from a Spark DataFrame: ``where`` is set once the executors have staged its files and
    # reported the partitions they hold (``dal.spark.write``), before the commit
    partitions: bool = False

    @property
    def dataset(self) -> str:
        """The catalog name this write is for ("" when unknown)."""
        return str(self.commit_metadata.get(DATASET_KEY, ""))

    @property
    def write_id(self) -> str:
        return str(self.commit_metadata.get(WRITE_ID_KEY, ""))

    @property
    def catalog(self) -> str:
        """The id of the catalog this write is for ("" when unknown)."""
        return str(self.commit_metadata.get(CATALOG_KEY, ""))

    @property
    def token(self) -> str:
        """What this write's staged files and directories carry in their names: its intent claims them."""
        from dal.storage.intents import token_of

        return token_of(self.write_id)


def commit_metadata(
    write_id: str, dataset: str = "", catalog: str = "", described: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The key/values a write stamps into its commit: its id (to find it again), the dataset's name, the id of
    the catalog it writes for (``sync`` tells its own catalog's commits from others'), and what the table then
    says about itself (``dal.formats.described.stamp``: carried by ``dal.register``)."""
    return {WRITE_ID_KEY: write_id, **({DATASET_KEY: dataset} if dataset else {}),
            **({CATALOG_KEY: catalog} if catalog else {}), **(described or {})}  # fmt: skip


def check_time_column(time_column: str | None, names: Sequence[str], what: str) -> None:
    """Refuse a ``time_column`` that is not among ``names`` (``what``: "a column of the data")."""
    if time_column is not None and time_column not in names:
        raise SchemaMismatch(f"time_column {time_column!r} is not {what}")


def replaces_schema(opts: WriteOptions) -> bool:
    """Whether the write replaces the table's schema (and may change its partitioning)."""
    return opts.mode == "overwrite" and opts.schema_mode == "overwrite"


def plan_partitioning(
    current: Sequence[str] | None, opts: WriteOptions, names: Sequence[str], where: str
) -> tuple[str, ...]:
    """The partition columns a write lays its files out by, checked against the columns it writes (``names``),
    before anything is written.

    ``current`` is the table's partitioning (None: no table yet). ``partition_by=None`` keeps it, on every
    mode; a different partitioning (``[]`` for none) needs ``mode='overwrite', schema_mode='overwrite'``, as
    in Delta. A schema overwrite whose new columns lack the current partition columns must say how the new
    version is partitioned.

    Raises:
        SchemaMismatch: naming the columns, with the call that works.
    """
    given = None if opts.partition_by is None else tuple(opts.partition_by)
    repeated = sorted({c for c in given or () if (given or ()).count(c) > 1})
    if repeated:
        raise SchemaMismatch(f"partition_by names {', '.join(repeated)} more than once")
    if current is not None and (given is None or given == tuple(current)):
        return _kept_partitioning(tuple(current), opts, names, where)
    if current is not None and not replaces_schema(opts):
        raise SchemaMismatch(
            f"{where} is partitioned by {list(current)}, not {list(given or ())}; "
            "to change that, write with mode='overwrite', schema_mode='overwrite'"
        )
    return _new_partitioning(given or (), names)  # a new table, or a schema overwrite that says how it is partitioned


def _kept_partitioning(parts: tuple[str, ...], opts: WriteOptions, names: Sequence[str], where: str) -> tuple[str, ...]:
    """The table's partitioning, kept: a schema overwrite must still have its columns."""
    missing = [c for c in parts if c not in names]
    if missing and replaces_schema(opts):
        raise SchemaMismatch(
            f"{where} is partitioned by {list(parts)}, and the new schema has no column {', '.join(missing)}: "
            "pass partition_by=[...] naming columns of the new data, or partition_by=[] for none"
        )
    return parts  # appends and overwrites may lack a nullable partition column: written as nulls


def _new_partitioning(parts: tuple[str, ...], names: Sequence[str]) -> tuple[str, ...]:
    """A partitioning the write sets: columns of the data, and not all of them."""
    absent = [c for c in parts if c not in names]
    if absent:
        raise SchemaMismatch(f"partition_by names columns not in the data: {', '.join(absent)}")
    if parts and len(parts) == len(names):
        raise SchemaMismatch(
            f"partition_by names every column ({', '.join(parts)}): the files would hold no data; keep one "
            "column out of it"
        )
    return parts


@dataclass(frozen=True)
class DataFile:
    """One data file of a pinned version: absolute URI, size, rows, and its partition values."""

    uri: str
    size_bytes: int
    row_count: int | None
    partition_values: tuple[tuple[str, str | None], ...]
    deleted_rows: tuple[int, ...] = ()  # positions (in the file) a Delta deletion vector removes


def _nothing_claimed(rel: str, age: float) -> bool:
    return False


@dataclass(frozen=True)
class Recorded:
    """The newest version the catalog recorded of a dataset, with its partitions: what a sync describes the next
    storage versions from (``Format.snapshots``' ``last``), when the format can apply new commits to it."""

    version: VersionInfo
    partitions: tuple[Partition, ...] = ()


@dataclass(frozen=True)
class Retention:
    """How gc judges files no version references: ``claimed`` says whether a write in flight may own one (its
    path below the location, its age in seconds; ``dal.storage.intents``), ``safe_age_s`` how old an
    unclaimed one must be before it counts as abandoned (a second line of defence, for writers that
    register no intent)."""

    safe_age_s: float
    claimed: Callable[[str, float], bool] = _nothing_claimed

    def abandoned(self, rel: str, age: float) -> bool:
        """Whether an unreferenced file may be deleted: old enough, and no write in flight claims it."""
        return age >= self.safe_age_s and not self.claimed(rel, age)


@dataclass(frozen=True)
class SparkSource:
    """A format Spark can read and write natively when ``jvm_class`` is on its classpath: the data source's
    name, and the reader option that pins a storage version."""

    name: str
    jvm_class: str
    version_option: str


@dataclass(frozen=True)
class Checked:
    """Local data a transaction checked (``WriteTransaction.prepare``): the reader, and the schema its batches are
    written in."""

    reader: pa.RecordBatchReader
    schema: pa.Schema


class WriteTransaction(ABC):
    """One write of one new storage version: ``check`` the data's schema, ``stage`` batches into files (on
    this process or on Spark executors: a transaction pickles), ``commit`` the staged files' records as ONE
    version, or ``abort``. Local data: ``prepare`` (every refusal, before anything is written) then
    ``write_prepared``. Created by ``Format.begin``, which refused everything it could before."""

    format_title: ClassVar[str]  # for messages ("Delta"); code never branches on it

    def __init__(self, location: str, opts: WriteOptions) -> None:
        self.location = location
        self.opts = opts
        # set by dal.api: sees every batch written (``dal.storage.timeparts.RuleCheck``: proves or enforces how time
        # partitions derive from the time column); a Spark write's executors hand back their copy's findings
        self.observer: RuleCheck | None = None

    def observed(self, batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        """``batches``, each seen by the observer first (when there is one)."""
        return batches if self.observer is None else self.observer.seen(batches)

    record_schema: ClassVar[pa.Schema]  # the Arrow schema of ``stage``'s records (for Spark's mapInArrow)

    @abstractmethod
    def check(self, schema: pa.Schema) -> pa.Schema:
        """Refuse (``SchemaMismatch``) data of ``schema`` that does not fit, before anything is written; return
        the schema (column order included) the batches given to ``stage`` must have."""

    @abstractmethod
    def stage(self, batches: Iterable[pa.RecordBatch]) -> list[dict[str, Any]]:
        """Write ``batches`` as new files nobody reads yet; describe each (picklable rows of ``record_schema``)."""

    @abstractmethod
    def commit(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Make the staged files one new storage version; return its number."""

    def abort(self) -> None:  # noqa: B027  (by default nothing to undo)
        """Forget an uncommitted write (remove what ``stage`` wrote where that is safe)."""

    def prepare(self, data: Any) -> Any:
        """Refuse local ``data`` (Arrow table / batches / reader, pandas; see ``dal.formats.inputs``) that does not
        fit — a time column it lacks, its schema (``check``) — before anything is written; return what
        ``write_prepared`` writes. Of a stream only the schema is read.

        Raises:
            SchemaMismatch, DalError: the data does not fit; nothing was written.
        """
        from dal.formats.inputs import to_reader

        reader = to_reader(data)
        check_time_column(self.opts.time_column, reader.schema.names, "a column of the data")
        return Checked(reader, self.check(reader.schema))

    def write_prepared(self, prepared: Any) -> int:
        """Write what ``prepare`` returned and commit it as one version (``abort`` on failure)."""
        assert isinstance(prepared, Checked)
        schema = prepared.schema
        try:
            batches = (b if b.schema.equals(schema) else b.select(schema.names) for b in prepared.reader)
            return self.commit(self.stage(self.observed(batches)))
        except BaseException:
            self.abort()
            raise

    def write(self, data: Any) -> int:
        """Write local ``data`` and commit it: ``prepare`` then ``write_prepared``."""
        return self.write_prepared(self.prepare(data))

    def delete_rows(self) -> int | None:
        """Commit a version without the rows ``opts.where`` matches (``dal.delete``); None when none matched
        (nothing committed).

        Raises:
            DalError: the format cannot delete rows. WriteConflict: the version read is not the newest now.
        """
        raise DalError(f"{self.format_title} datasets: dal cannot delete rows of them")

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """The partition columns the new version is laid out by (settled by ``check``)."""
        return tuple(self.opts.partition_by or ())

    def landed(self) -> int | None:
        """After an error on the way back from ``commit``: the version this write's commit got if it landed
        anyway (None: it did not, or that cannot be told)."""
        return None

    def spark_options(self) -> dict[str, str] | None:
        """Options for Spark's native writer of this format (``Format.spark_source``); None: stage instead."""
        return None

    def native_commit(self) -> int:
        """The version Spark's native writer (``spark_options``) committed for this write."""
        raise FormatError(f"{self.format_title} has no native Spark writer")


class Format(ABC):
    """A storage format: commits data as immutable storage versions and describes them to the catalog."""

    name: ClassVar[str]
    writable: ClassVar[bool] = True  # dal writes it (and adopts first writes it finds unrecorded)
    needs_tensor_schema: ClassVar[bool] = False  # a new dataset's write needs WriteOptions.tensor_schema
    spark_source: ClassVar[SparkSource | None] = None
    # folder names that mark a table's root: one below a location is another table's (gc and purge leave it)
    table_roots: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        """Whether a table of this format is at ``location``."""

    @abstractmethod
    def begin(self, location: str, opts: WriteOptions, latest: VersionInfo | None) -> WriteTransaction:
        """Start a write to ``location`` whose newest recorded version is ``latest``, refusing options that
        do not fit the table (``SchemaMismatch`` / ``DalError``) before anything is written."""

    def written_for(self, location: str, storage_options: Mapping[str, str]) -> str:
        """The catalog name dal wrote the table at ``location`` for, from its first commit ("" if unknown)."""
        return ""

    @abstractmethod
    def snapshots(
        self,
        location: str,
        storage_options: Mapping[str, str],
        *,
        after: int | None,
        previous: Schema | None,
        partition_types: Mapping[str, pa.DataType] | None = None,
        last: Recorded | None = None,
    ) -> list[VersionDraft]:
        """Describe every storage version newer than ``after`` (all when None), oldest first.

        ``partition_types``: the types of partition columns the table's files do not record (plain directories;
        formats that record them ignore it). ``last``: the catalog's newest version (storage version ``after``)
        and its partitions, which a format may apply the new commits to instead of loading the table (Delta);
        others ignore it."""

    @abstractmethod
    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        """The data files of one pinned version (refusing features the plain reader cannot honour)."""

    def changes(
        self,
        location: str,
        storage_options: Mapping[str, str],
        versions: Sequence[VersionInfo],
        since: VersionInfo | None,
    ) -> ChangePlan:
        """What the recorded ``versions`` (oldest first: every version after ``since``, None: from the first)
        inserted and deleted, as a plan of plain values (``dal.formats.changes``); no row is read.

        Raises:
            ChangesUnavailable: the format or the history cannot say exactly what changed.
        """
        from dal.errors import ChangesUnavailable

        name = versions[0].dataset if versions else "the dataset"
        raise ChangesUnavailable(f"{name} is a {self.name} dataset: dal cannot tell what changed between its versions")

    def described(self, location: str, storage_options: Mapping[str, str]) -> Described:
        """What the table's commits record about the dataset (``dal.formats.described``; nothing by default)."""
        return Described()

    def file_index(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> FileIndex | None:
        """The version's files as columns with their recorded statistics, for pruning before any file is
        opened (``dal.formats.index``); None when the format records none (planning then uses ``files``)."""
        return None

    @abstractmethod
    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        """The full Arrow schema (partition columns included) of one pinned version."""

    def physical_schema(self, schema: pa.Schema) -> pa.Schema | None:
        """``schema`` (a version's ``arrow_schema``) with each field named as in the data files, when that
        differs (Delta column mapping); None when the files use the logical names. No I/O."""
        return None

    def external_location(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> str:
        """The directory another engine (a Hive table, the format's own reader) reads exactly this version at.

        Raises:
            UnsupportedFeature / DalError: no plain directory holds exactly this version's rows.
        """
        return location

    def native_url(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> str:
        """The URL the format's own reader library opens this version at (Petastorm datasets only)."""
        raise FormatError(f"{version.dataset} is a {self.name} dataset, not a Petastorm one")

    # -- retention: what ``dal drop --purge`` and ``dal gc`` may delete (formats dal writes only) ----------

    def owns(self, rel: str) -> bool:
        """Whether ``rel`` (a file below a table's location) is one dal, or the format's writer on its behalf,
        writes: the only files a purge deletes."""
        return False

    def is_record(self, rel: str) -> bool:
        """Whether ``rel`` is one of the table's commit records: a purge deletes them last (an interrupted
        purge leaves a table dal still recognises), gc first (a version's record goes before its data)."""
        return False

    def garbage(
        self,
        dataset: str,
        location: str,
        storage_options: Mapping[str, str],
        expiring: Sequence[VersionInfo],
        kept: Sequence[VersionInfo],
        retention: Retention,
    ) -> list[tuple[str, int]]:
        """(path below the location, bytes) of every file no ``kept`` version needs that is either a file of an
        ``expiring`` version (versions an interrupted gc expired included: their records or log entries may be
        gone already) or referenced by no version and ``retention.abandoned``, sorted. A file no version's
        record names is never returned while a write in flight claims it (``retention.claimed``).

        Raises:
            DalError: the files kept versions need cannot be told for certain (nothing may be deleted then).
        """
        raise DalError(f"{dataset} is a {self.name} dataset dal registered read-only: gc does not delete its files")

    def prepare_gc(  # noqa: B027  (by default nothing to prepare)
        self, location: str, storage_options: Mapping[str, str], kept: Sequence[VersionInfo], doomed: Sequence[str]
    ) -> None:
        """Before gc deletes ``doomed`` (not on a dry run): what keeps the ``kept`` versions readable without
        them (Delta: a checkpoint at the oldest kept version before log entries go)."""

    def tidy(self, location: str, storage_options: Mapping[str, str], deleted: Sequence[str]) -> None:  # noqa: B027
        """After gc deleted ``deleted``: remove the directories it left behind."""

    def compact(self, location: str, latest: VersionInfo, opts: WriteOptions, target_file_size: int) -> int | None:
        """Rewrite ``latest``'s rows into fewer files (about ``target_file_size`` bytes each) as a new storage
        version stamped with ``opts.commit_metadata``; return its number, or None when there was nothing to
        compact. The same rows, schema and partitioning; older versions stay readable.

        Raises:
            DalError: this format cannot be compacted by dal.
        """
        raise DalError(f"{self.name} datasets cannot be optimized by dal")
