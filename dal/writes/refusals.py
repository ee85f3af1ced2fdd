"""Every refusal of a write, in one place and in order: ``arguments`` (before the catalog is opened) and ``plan``
(after). A write that passes them touches storage; one that does not leaves the table and the catalog as they were.

The order (each step's errors, as ``dal.write`` documents them):

1. ``arguments`` — the arguments by themselves (``dal.validate.check``: partition_by, tags, format, description,
   time_column, path, storage_options, catalog), ``schema`` a TensorSchema, ``time_partitions``
   (``timeparts.check``), ``target_file_size``, the name, ``mode``, a streaming Spark DataFrame, ``compression``,
   ``schema_mode``, ``where`` / ``overwrite`` (``changes.check_arguments``), the tags' names: ``InvalidName`` /
   ``DalError``, the first bad argument by name.
2. ``inputs=`` — each declared input resolved in the catalog: ``DalError``, ``DatasetNotFound``, ``VersionNotFound``.
2b. through a ``dal serve`` catalog, the write begins there (``dal.writes.credentials``): WRITE on the dataset
   (``NotAuthorized``), and the storage credentials the server vends for it, or refuses to (``CatalogError``).
3. the target (``_target``) — another catalog's claim on a new location (``ClaimedElsewhere``), a table of
   another dataset there (``DatasetExists``; a first write of this dataset found unrecorded is adopted), another
   format or location than the dataset's (``DalError``), a tag taken (``TagExists``), ``time_partitions`` without
   a time column (``DalError``).
4. the catalog's permission to record versions (``Catalog.check_writable``: ``CatalogReadOnly``).
5. the location's claim (``check_claim``: ``ClaimedElsewhere``, ``ReadOnlyDataset``, ``PurgeUnfinished``).
6. ``where=`` / ``overwrite='partitions'`` / ``dal.delete`` (``dal.writes.changes.predicate``): a version to
   replace rows of, the predicate bound against its schema (``FilterError``: an unknown column, as every filter),
   a partitioned table (``DalError``), and every row of in-memory data matching it (``DalError``; a Spark
   DataFrame's rows are checked on the executors as they are staged).
7. the format's options (``Format.begin``: ``SchemaMismatch`` / ``DalError``: partitioning, schema mode, a
   Petastorm TensorSchema).
8. a declared time-partition rule: its partition columns (``SchemaMismatch``), then the rows of in-memory data
   (pandas, Arrow) against it (``SchemaMismatch``).
9. the data (``WriteTransaction.prepare``, local data: its schema against the table's, types the format cannot
   hold, Petastorm's every value against the TensorSchema): ``SchemaMismatch``. A Spark DataFrame's schema is
   checked by ``dal.spark.write.write_dataframe`` on the driver before any executor task runs.

Refused later, because only then can they be seen: a row of a stream or a Spark DataFrame that breaks a declared
rule (before the storage commit), a claim another catalog took meanwhile (checked again once the write's intent is
registered: ``dal.writes.commit.store``), another writer's commit on the version an overwrite or a delete read
(``WriteConflict``, at the commit), a row of a stream or a Spark DataFrame that a partial overwrite's predicate does
not match (before the commit).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dal import expr as E
from dal import lineage, validate
from dal.catalog import DatasetInfo, DatasetNotFound, VersionInfo
from dal.catalog.errors import LocationTaken
from dal.catalog.types import DECLARED, Input, validate_name, validate_tag
from dal.dataset import Dataset
from dal.errors import DalError, DatasetExists, SchemaMismatch, TagExists
from dal.formats.base import (
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
from dal.formats.registry import get_format
from dal.storage import timeparts, uris
from dal.storage.timeparts import TimePartitions
from dal.tensors.schema import TensorSchema
from dal.writes import changes
from dal.writes.credentials import write_options
from dal.writes.recording import check_claim, is_read_only, sync

if TYPE_CHECKING:
    from dal.catalog import Catalog


@dataclass(frozen=True)
class WriteRequest:
    """``dal.write``'s arguments as one value (``arguments`` checks them all before the catalog is opened)."""

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
    catalog: Catalog | str | None
    inputs: Sequence[Any] | None
    track: bool
    where: Any = None  # the rows an overwrite replaces (a SQL string or an Expr; ``dal.writes.changes``)
    overwrite: str = "table"  # or "partitions": the partitions the data holds
    delete: bool = False  # ``dal.delete``: no data; a version without the rows ``where`` matches


@dataclass(frozen=True)
class PlannedWrite:
    """A checked write with everything settled before storage is touched: the catalog, where it writes, the
    format's open transaction, and the lineage it will record."""

    request: WriteRequest
    cat: Catalog
    fmt: Format
    options: dict[str, str]
    existing: DatasetInfo | None
    location: str
    rule: TimePartitions | None
    create: Callable[[], None]
    opts: WriteOptions
    txn: WriteTransaction
    prepared: Any  # local data checked by ``txn.prepare`` (None: a Spark DataFrame, checked as it is written)
    upstream: list[Input]
    produced_by: dict[str, Any]
    reads_done: Callable[[], None]  # ends this process's window of reads (inferred lineage) once committed


def arguments(req: WriteRequest) -> WriteRequest:
    """Refusals 1: ``req`` with its compression as a codec, its tags and file size checked, before the catalog is
    opened.

    Raises:
        InvalidName, DalError: the first bad argument, by name.
    """
    validate.check(partition_by=req.partition_by, tags=req.tags, format=req.format, description=req.description,
                   time_column=req.time_column, path=req.path, storage_options=req.storage_options,
                   catalog=req.catalog)  # fmt: skip
    if req.schema is not None and not isinstance(req.schema, TensorSchema):
        raise DalError(f"schema must be a dal.TensorSchema (or None), not {type(req.schema).__name__}")
    timeparts.check(req.time_partitions)
    size = None if req.target_file_size is None else validate.file_size(req.target_file_size)
    validate_name(req.name)
    if req.mode not in ("append", "overwrite"):
        raise DalError(f"mode must be 'append' or 'overwrite', not {req.mode!r}")
    if is_spark_dataframe(req.data):
        from dal.spark.write import check_frame

        check_frame(req.data)  # a streaming DataFrame is refused before anything runs
    codec = check_compression(req.compression)
    _check_schema_mode(req.schema_mode, req.mode)
    changes.check_arguments(req.mode, req.where, req.overwrite, req.schema_mode)
    tags = tuple(validate_tag(t) for t in (req.tags or ()))
    return replace(req, compression=codec, tags=tags, target_file_size=size)


def _check_schema_mode(schema_mode: SchemaMode, mode: str) -> None:
    if schema_mode not in (None, "merge", "overwrite"):
        raise DalError(f"schema_mode must be None, 'merge' or 'overwrite', not {schema_mode!r}")
    if schema_mode == "overwrite" and mode != "overwrite":
        raise DalError("schema_mode='overwrite' replaces the schema and needs mode='overwrite'")


def plan(req: WriteRequest, cat: Catalog) -> PlannedWrite:
    """Refusals 2 to 9 (the module's list, in that order) for a request ``arguments`` checked: the target found
    or adopted, the format's transaction begun, the data checked. Nothing is written to storage before this
    returns (an adopted first write is recorded in the catalog).

    Raises:
        DatasetExists, TagExists, SchemaMismatch, CatalogReadOnly, ClaimedElsewhere, ReadOnlyDataset,
        PurgeUnfinished, DalError (see ``dal.write``).
    """
    declared = req.inputs if req.inputs is not None else lineage.declared()
    declared_inputs = None if declared is None else _declared_inputs(declared, cat)  # 2
    fmt = get_format(req.format)
    options = write_options(cat, req.name, req.path, req.storage_options or {})  # 2b
    existing, location, rule, create = _target(
        cat,
        req.name,
        req.format,
        fmt,
        options,
        path=req.path,
        tags=tuple(req.tags or ()),
        description=req.description,
        time_column=req.time_column,
        time_partitions=req.time_partitions,
    )  # 3  fmt: skip
    cat.check_writable(req.name)  # 4: before anything reaches storage: a commit nobody may record helps no one
    if existing is not None:  # 5 (a new location's claim was checked by _target): this catalog's, or nobody's
        # (claimed once the write begins), and no purge of it was stopped half-way
        check_claim(cat, req.name, fmt, location, options, "write", recorded=True,
                    read_only=is_read_only(existing), take=False)  # fmt: skip
    latest = cat.version(existing.name) if existing is not None and existing.latest_version is not None else None
    # 6: the rows a partial overwrite or a delete replaces, bound against the version it reads (a stream whose
    # partitions are replaced is read into memory here)
    where, data = changes.predicate(req.name, fmt, location, options, latest, req.where, req.overwrite, req.data)
    req = replace(req, data=data)
    deferred = req.overwrite == "partitions" and is_spark_dataframe(req.data)  # known once its files are staged
    opts = replace(_options(req, cat, fmt, existing, options), where=where, partitions=deferred)
    txn = fmt.begin(location, opts, latest)  # 7: refuses options that do not fit
    txn.observer = _rule_check(req.data, opts, latest, rule, existing)  # 8: the rule's partition columns
    _check_in_memory(req.data, txn.observer)  # 8: a row of in-memory data that breaks a declared rule
    local = not req.delete and not is_spark_dataframe(req.data)
    prepared = txn.prepare(req.data) if local else None  # 9: the data
    reads, window, mark = lineage.inferred()  # the reads since the previous write
    upstream = declared_inputs if declared_inputs is not None else reads
    if where is not None and latest is not None:  # the version read: its rows the predicate does not match
        upstream = [*upstream, Input(req.name, latest.number, f"NOT ({E.to_sql(where)})", DECLARED)]
    produced_by = lineage.collect(req.data, spark=is_spark_dataframe(req.data), upstream=upstream)
    return PlannedWrite(req, cat, fmt, options, existing, location, rule, create, opts, txn, prepared, upstream,
                        produced_by, functools.partial(lineage.done, window, mark))  # fmt: skip


def _options(
    req: WriteRequest, cat: Catalog, fmt: Format, existing: DatasetInfo | None, options: dict[str, str]
) -> WriteOptions:
    """The ``WriteOptions`` the format begins with (a Spark DataFrame's TensorSchema inferred where a new dataset
    or schema needs one)."""
    schema = req.schema
    new = existing is None or existing.latest_version is None
    inferred = schema is None and fmt.needs_tensor_schema and is_spark_dataframe(req.data)
    inferred = inferred and (new or req.schema_mode is not None)
    if inferred:
        from dal.spark.frames import infer_tensor_schema  # a new dataset or schema: codecs/shapes from the data

        schema = infer_tensor_schema(req.data)
    described = stamp(existing, req.time_column, req.description, tuple(req.tags or ()))
    return WriteOptions(
        mode=req.mode,
        partition_by=None if req.partition_by is None else tuple(req.partition_by),  # None: as the table is
        schema_mode=req.schema_mode,
        storage_options=options,
        commit_metadata=commit_metadata(uuid.uuid4().hex, req.name, cat.catalog_id, described),
        tensor_schema=schema,
        tensor_schema_inferred=inferred,
        time_column=req.time_column,
        compression=req.compression,
        target_file_size=req.target_file_size,
    )


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
        taken = cat.overlapping(location, besides=name)  # the create after the commit would refuse: before any data
        if taken:
            raise LocationTaken(
                f"{location} overlaps the location of dataset {', '.join(repr(t) for t in taken[:3])} (the same place, inside "
                f"it or around it); one location belongs to one dataset: nothing was written for {name!r}"
            )

        if fmt.exists(location, options):
            if fmt.written_for(location, options) != name:
                raise DatasetExists(
                    f"a {format} table already exists at {location} but is not in the catalog; "
                    f"adopt it first with dal.register({name!r}, {location!r})"
                )
            # a first write of this dataset committed there and was not recorded (killed, or racing this
            # one): record it now, then write on top of it like any later write, with its checks
            cat.check_writable(name)
            check_claim(cat, name, fmt, location, options, "write", recorded=False)
            create()
            sync(name, options, cat)
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
