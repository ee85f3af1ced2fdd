"""Writing a Delta table: the checks before a write, local data through delta-rs's writer, compaction, and
the ``DeltaWrite`` transaction (Spark: files staged on the executors, committed as one version)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

import pyarrow as pa

from dal import progress
from dal.catalog.types import VersionInfo
from dal.errors import DalError, SchemaMismatch, WriteConflict, one_line, translate
from dal.formats.base import (
    Checked,
    WriteOptions,
    WriteTransaction,
    plan_partitioning,
    replaces_schema,
)
from dal.formats.delta.log import _arrow_schema, _dl, _opts, find_commit, open_table, table_exists
from dal.formats.delta.predicate import to_delta_sql
from dal.formats.delta.staging import FILE_SCHEMA, write_files
from dal.formats.delta.types import ConformedReader, check_writable, describe_mismatch
from dal.formats.directory import missing_files, vanished
from dal.formats.inputs import checked_batches
from dal.formats.logical import logical_schema, written_type
from dal.storage import uris
from dal.storage.location import Location
from dal.storage.partitions import blank_partitions_as_null

# dal's codec names (pyarrow's) as delta-rs's WriterProperties and Spark's Parquet writer name them: pyarrow's
# "lz4" is Parquet's LZ4_RAW (the Hadoop-framed LZ4 is deprecated and pyarrow cannot read it)
_DELTA_RS_CODECS = {"snappy": "SNAPPY", "gzip": "GZIP", "zstd": "ZSTD", "lz4": "LZ4_RAW", "brotli": "BROTLI",
                    "none": "UNCOMPRESSED"}  # fmt: skip
_SPARK_CODECS = {"lz4": "lz4raw", "none": "uncompressed"}


def check_write(location: str, schema: pa.Schema, opts: WriteOptions) -> tuple[str, ...]:
    """Refuse (``SchemaMismatch``) a write that does not fit the table, before anything is written: types
    Delta cannot hold, the partitioning (``dal.formats.base.plan_partitioning``) and the schema against
    the table's. Returns the partition columns the new version is laid out by."""
    if not schema.names:
        raise SchemaMismatch(f"cannot write to the Delta table {location}: the data has no columns")
    check_writable(schema, location)  # types Delta cannot hold are refused before anything is written
    table = open_table(location, opts.storage_options) if table_exists(location, opts.storage_options) else None
    current_parts = tuple(table.metadata().partition_columns) if table is not None else None
    parts = plan_partitioning(current_parts, opts, schema.names, f"the Delta table {location}")
    _check_partition_types(location, schema, parts)
    if table is None or replaces_schema(opts):
        return parts
    problems = _schema_problems(_arrow_schema(table), schema, opts)
    if problems:
        verb = "append to" if opts.mode == "append" else "overwrite"
        hint = " (or schema_mode='overwrite' to replace the schema)" if opts.mode == "overwrite" else ""
        raise SchemaMismatch(f"cannot {verb} {location}: " + "; ".join(problems) + hint)
    return parts


def _check_partition_types(location: str, schema: pa.Schema, parts: Sequence[str]) -> None:
    """Refuse a struct, list or map partition column (a directory holds one plain value)."""
    nested = [
        f"{c} ({schema.field(c).type})" for c in parts if c in schema.names and pa.types.is_nested(schema.field(c).type)
    ]
    if nested:
        raise SchemaMismatch(
            f"cannot partition the Delta table {location} by {', '.join(nested)}: a partition column holds "
            "one plain value per directory, not a struct, list or map"
        )


def _schema_problems(recorded: pa.Schema, schema: pa.Schema, opts: WriteOptions) -> list[str]:
    """What keeps data of ``schema`` from being written to a table whose schema is ``recorded`` (its Arrow
    schema as delta-rs reads it): columns of another type, required columns missing, new columns without
    ``schema_mode='merge'``; empty when it fits."""
    current = logical_schema(recorded)  # recorded columns as written (dal.formats.logical)
    missing, new, changed = describe_mismatch(current, schema)
    changed += [
        f"{f.name} ({f.type} -> {schema.field(f.name).type})"
        for f in recorded
        if written_type(f) is not None
        and f.name in schema.names
        and not schema.field(f.name).type.equals(current.field(f.name).type)
        and not any(c.startswith(f"{f.name} (") for c in changed)
    ]
    problems = []
    if changed:
        problems.append("columns with another type: " + ", ".join(changed))
    # as in Delta, data without a nullable column of the table is written with NULLs in it
    required = [c for c in missing if not current.field(c).nullable]
    if required:
        problems.append("columns missing from the data (not nullable in the table): " + ", ".join(required))
    if opts.schema_mode != "merge" and new:
        problems.append("new columns: " + ", ".join(new) + " (pass schema_mode='merge' to add them)")
    return problems


NO_TABLE = -1  # an overwrite's base when it began before the table existed: it commits only while none does


def base_version(location: str, opts: WriteOptions) -> int | None:
    """The table's version when an overwrite begins (``NO_TABLE``: there was no table; None: not an
    overwrite): what it read, and commits on only while it is still the newest (``write_local``)."""
    if opts.mode != "overwrite":
        return None
    if not table_exists(location, opts.storage_options):
        return NO_TABLE
    return int(open_table(location, opts.storage_options).version())


def _props(opts: WriteOptions, base: int | None) -> Any:
    """The commit's properties: dal's metadata, and for an overwrite on a base no retry (delta-rs's conflict
    resolution would commit it over an append that landed meanwhile, keeping that append's files under the new
    schema, or dropping its rows from the newest version)."""
    dl = _dl()
    extra = {} if base is None else {"max_commit_retries": 0}
    return dl.CommitProperties(custom_metadata=dict(opts.commit_metadata), **extra)


def _conflict(location: str, base: int) -> WriteConflict:
    read = (
        "no table, which this overwrite began on"
        if base == NO_TABLE
        else f"Delta version {base}, which this overwrite read"
    )
    return WriteConflict(
        f"{location}: another writer committed after {read}; nothing was committed, so no rows of that commit "
        "were lost: run it again"
    )


def write_local(
    location: str, data: pa.RecordBatchReader, opts: WriteOptions, parts: Sequence[str], base: int | None = None
) -> int:
    """Write local ``data`` with delta-rs as one version laid out by ``parts`` (from ``check_write``); an
    overwrite with a ``base`` commits only as the version right after it.

    Raises:
        WriteConflict: another commit landed after ``base``; nothing was committed.
    """
    dl = _dl()
    conformed = _conformed(location, data, opts, parts)
    # a target only when one was asked for: otherwise delta-rs's own default (the keyword left out)
    sizing = {} if opts.target_file_size is None else {"target_file_size": opts.target_file_size}
    first = base == NO_TABLE  # an overwrite that began on no table: it creates one, or conflicts
    if first and table_exists(location, opts.storage_options):
        raise _conflict(location, NO_TABLE)
    target: Any = location if base is None or first else open_table(location, opts.storage_options, base)
    try:
        dl.write_deltalake(
            target,
            progress.counted(conformed.reader),  # rows handed to delta-rs, on a terminal's progress line
            # a table that appears meanwhile fails the create (delta-rs's "error" mode, no retry): a conflict
            mode="error" if first else opts.mode,
            # a schema overwrite may change the partitioning ([]: none); otherwise the table's, as checked
            partition_by=list(parts) if replaces_schema(opts) else (list(parts) or None),
            schema_mode=None if first else opts.schema_mode,
            # a partial overwrite: only the rows the bound predicate matches are replaced
            predicate=_predicate(opts, target),
            storage_options=_opts(opts.storage_options),
            commit_properties=_props(opts, base),
            writer_properties=dl.WriterProperties(compression=_DELTA_RS_CODECS[opts.compression]),
            **sizing,
        )
    except Exception as e:
        _raise_write_error(e, location, opts, conformed, base)
    return find_commit(location, opts)


def _predicate(opts: WriteOptions, target: Any) -> str | None:
    """A partial overwrite's predicate as delta-rs's SQL, its literals typed by the table it replaces rows of
    (``target``: the table opened at the overwrite's base); None: the whole table."""
    if opts.where is None:
        return None
    if isinstance(target, str):  # no table at the base: nothing to replace rows of
        raise DalError(f"{target}: no Delta table to replace rows of")
    return to_delta_sql(opts.where, _arrow_schema(target))


def _conformed(location: str, data: pa.RecordBatchReader, opts: WriteOptions, parts: Sequence[str]) -> ConformedReader:
    """``data`` as delta-rs is handed it: the table's missing nullable columns added, blank partition values
    null, types conformed (unsigned -> signed, tensors -> binary, ns -> us, … refusing values that do not fit)."""
    current = None
    if not replaces_schema(opts) and table_exists(location, opts.storage_options):
        current = _arrow_schema(open_table(location, opts.storage_options))
        data = _with_missing_columns(data, logical_schema(current))
    # an empty partition value is null to every reader (delta-rs, Spark, dal) and Hive: written where nulls go
    data = blank_partitions_as_null(data, parts)
    return ConformedReader(data, current)


def _raise_write_error(
    e: Exception, location: str, opts: WriteOptions, conformed: ConformedReader, base: int | None
) -> NoReturn:
    """Raise delta-rs's error of ``write_local`` as dal's: the value the conformed reader refused,
    ``SchemaMismatch``, ``WriteConflict`` for an overwrite overtaken, else one line, masked, with a hint for an
    object store's error."""
    dl = _dl()
    if isinstance(e, dl.exceptions.SchemaMismatchError | pa.ArrowInvalid | pa.ArrowTypeError):
        if conformed.error is not None:
            raise conformed.error from None
        raise SchemaMismatch(f"delta-rs refused the data for {location}: {one_line(e)}") from e
    if isinstance(e, dl.exceptions.CommitFailedError):
        if base is None:
            raise translate(e, f"writing Delta table {location}", local=uris.is_local(location)) from e
        raise _conflict(location, base) from e
    if conformed.error is not None:
        raise conformed.error from None
    if base == NO_TABLE and table_exists(location, opts.storage_options) and _landed(location, opts) is None:
        raise _conflict(location, NO_TABLE) from e  # another writer created the table first
    raise translate(e, f"writing Delta table {location}", local=uris.is_local(location)) from e


def _landed(location: str, opts: WriteOptions) -> int | None:
    try:
        return find_commit(location, opts)
    except (DalError, OSError):
        return None


def compact(location: str, latest: VersionInfo, opts: WriteOptions, target_file_size: int) -> int | None:
    """delta-rs's ``optimize.compact``: one commit (``OPTIMIZE``, ``dataChange: false``) that adds the
    bin-packed files and removes the small ones; the old files stay for older versions until gc."""
    dl = _dl()
    table = open_table(location, opts.storage_options)
    if table.version() != latest.storage_version:  # committed since optimize synced: it compacts again
        raise WriteConflict(
            f"{location}: Delta version {table.version()} was committed after version {latest.storage_version}, "
            "which this compaction read; nothing was committed"
        )
    try:
        metrics = table.optimize.compact(
            target_size=target_file_size,
            commit_properties=dl.CommitProperties(custom_metadata=dict(opts.commit_metadata)),
            writer_properties=dl.WriterProperties(compression=_DELTA_RS_CODECS[opts.compression]),
        )
    except dl.exceptions.CommitFailedError as e:  # delta-rs's conflict check: another commit overtook it
        raise WriteConflict(f"{location}: compaction overtaken by another commit ({one_line(e)})") from e
    except Exception as e:
        raise translate(e, f"compacting Delta table {location}", local=uris.is_local(location)) from e
    if not int(metrics.get("numFilesAdded", 0)) and not int(metrics.get("numFilesRemoved", 0)):
        return None  # already compact: delta-rs committed nothing
    return find_commit(location, opts)


def _with_missing_columns(data: pa.RecordBatchReader, table: pa.Schema) -> pa.RecordBatchReader:
    """``data`` with the table's columns it lacks added as NULLs (check_write let only nullable ones pass),
    in the table's column order, new columns (schema_mode='merge') after them."""
    absent = [f for f in table if f.name not in data.schema.names]
    if not absent:
        return data
    order = [f.name for f in table] + [n for n in data.schema.names if n not in table.names]
    fields = {f.name: f for f in data.schema} | {f.name: f.with_nullable(True) for f in absent}
    schema = pa.schema([fields[n] for n in order])

    def batches() -> Iterable[pa.RecordBatch]:
        for b in data:
            cols = {n: b.column(n) for n in b.schema.names} | {f.name: pa.nulls(b.num_rows, f.type) for f in absent}
            yield pa.RecordBatch.from_arrays([cols[n] for n in order], schema=schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _add_actions(records: Iterable[Mapping[str, Any]]) -> list[Any]:
    """delta-rs's add actions for files staged by ``staging.write_files`` (their records)."""
    dl = _dl()
    return [
        dl.transaction.AddAction(
            path=r["path"],
            size=r["size"],
            partition_values=json.loads(r["partition_values"]),
            modification_time=r["modification_time"],
            data_change=True,
            stats=r["stats"],
        )
        for r in records
    ]


class DeltaWrite(WriteTransaction):
    """One Delta commit: delta-rs's writer for local data; for Spark, Parquet files staged with Delta
    statistics (``delta.staging``, on the executors) committed as ONE version through delta-rs."""

    format_title = "Delta"
    record_schema = FILE_SCHEMA

    def __init__(self, location: str, opts: WriteOptions) -> None:
        super().__init__(location, opts)
        self.parts: list[str] = list(opts.partition_by or ())
        # an overwrite replaces what it saw when it began: it commits only if nothing was committed since
        self.base = base_version(location, opts)

    def check(self, schema: pa.Schema) -> pa.Schema:
        # the partitioning the new version is laid out by: the table's unless a schema overwrite changes it
        self.parts = list(check_write(self.location, schema, self.opts))
        self._schema = schema
        return schema

    @property
    def _replacing(self) -> bool:
        return replaces_schema(self.opts)

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return tuple(self.parts)

    def stage(self, batches: Iterable[pa.RecordBatch]) -> list[dict[str, Any]]:
        return write_files(
            batches, self.location, self.parts, dict(self.opts.storage_options), prefix=f"part-{self.opts.token}",
            compression=self.opts.compression,
        )  # fmt: skip

    def commit(self, records: Sequence[Mapping[str, Any]]) -> int:
        """Commit the staged files as one version, after checking every one of them is still there.

        Raises:
            FormatError: a staged file is gone (nothing is committed).
        """
        dl = _dl()
        opts, location, schema = self.opts, self.location, self._schema
        loc = Location.of(location, opts.storage_options)
        staged = [str(r["path"]) for r in records]
        gone = missing_files(loc, staged)
        if gone:
            raise vanished(loc, gone, len(staged))
        storage = _opts(opts.storage_options)
        props = _props(opts, self.base)
        actions = _add_actions(records)
        parts = self.parts or None
        if not table_exists(location, opts.storage_options):
            dl.transaction.create_table_with_add_actions(
                location, dl.Schema.from_arrow(schema), actions, mode="error", partition_by=parts,
                storage_options=storage, commit_properties=props,
            )  # fmt: skip
            return find_commit(location, opts)
        table = dl.DeltaTable(location, storage_options=storage)
        if self.base is not None and table.version() != self.base:  # the overwrite's base was overtaken
            raise _conflict(location, self.base)
        if opts.where is not None:
            return self._commit_replacing(table, actions, props)
        meta = table.metadata()
        if self._replacing and tuple(meta.partition_columns) != tuple(self.parts):
            # delta-rs's write transaction keeps the old partitionColumns beside the new schema (a table no
            # reader can open): a new partitioning is committed as one CREATE OR REPLACE version instead, which
            # removes every file of the table and keeps its history, configuration (table features), name
            # and description
            dl.transaction.create_table_with_add_actions(
                location, dl.Schema.from_arrow(schema), actions, mode="overwrite", partition_by=parts,
                name=meta.name, description=meta.description, configuration=dict(meta.configuration),
                storage_options=storage, commit_properties=props,
            )  # fmt: skip
            return find_commit(location, opts)
        if opts.schema_mode == "merge":
            # create_write_transaction writes no metaData action for appends, so new columns are added first
            # in their own commit (a schema-change version), then the files are appended against that schema
            current = pa.schema(table.schema().to_arrow())
            extra = [f.with_nullable(True) for f in schema if f.name not in current.names]
            if extra:
                table.alter.add_columns(list(dl.Schema.from_arrow(pa.schema(extra)).fields))
                table = dl.DeltaTable(location, storage_options=storage)
        target = schema if self._replacing else pa.schema(table.schema().to_arrow())
        try:
            table.create_write_transaction(
                actions, mode=opts.mode, schema=target, partition_by=parts, commit_properties=props
            )
        except dl.exceptions.CommitFailedError as e:
            if self.base is None:
                raise
            raise _conflict(location, self.base) from e
        return find_commit(location, opts)

    def _commit_replacing(self, table: Any, adds: list[Any], props: Any) -> int:
        """A partial overwrite staged by Spark: ONE commit on the version read (``base``, no retry) that adds
        the staged files and removes the files holding rows ``opts.where`` matches, their other rows rewritten
        into files added with them (``delta.replace``).

        Raises:
            WriteConflict: a commit landed after the version read; nothing was committed.
        """
        from dal.formats.delta.replace import replaced_files

        dl = _dl()
        opts, location = self.opts, self.location
        assert opts.where is not None and self.base is not None
        removes, rewritten = replaced_files(
            location, table, opts.where, opts.storage_options, prefix=f"part-{opts.token}-kept",
            compression=opts.compression,
        )  # fmt: skip
        now = int(time.time() * 1000)
        actions = [*adds, *_add_actions(rewritten)]
        actions += [
            dl.transaction.RemoveAction(
                path=r["path"],
                data_change=True,
                deletion_timestamp=now,
                size=r["size"],
                partition_values=r["partition_values"],
            )
            for r in removes
        ]
        try:
            table.create_write_transaction(
                actions, mode="append", schema=pa.schema(table.schema().to_arrow()), partition_by=self.parts or None,
                commit_properties=props,
            )  # fmt: skip
        except dl.exceptions.CommitFailedError as e:
            raise _conflict(location, self.base) from e
        return find_commit(location, opts)

    def write_prepared(self, prepared: Any) -> int:
        """Write checked local data with delta-rs (``write_local``): one commit, on the overwrite's base."""
        assert isinstance(prepared, Checked)
        reader = prepared.reader
        if self.opts.where is not None:  # a partial overwrite writes only rows it replaces: checked before the commit
            reader = pa.RecordBatchReader.from_batches(reader.schema, checked_batches(reader, self.opts.where))
        if self.observer is not None:
            reader = pa.RecordBatchReader.from_batches(reader.schema, self.observed(reader))
        try:
            return write_local(self.location, reader, self.opts, self.parts, self.base)
        except DalError as e:
            if self.observer is not None and self.observer.error is not None:
                raise self.observer.error from None  # a row broke a declared rule: delta-rs stopped, no commit
            # an error on the way back (a lost response after the store took the commit) may hide a commit
            landed = None if isinstance(e, SchemaMismatch) else self.landed()
            if landed is None:
                raise
            return landed

    def delete_rows(self) -> int | None:
        """delta-rs's ``DELETE`` of the rows ``opts.where`` matches, on the table as this write read it (``base``,
        no retry): files holding them are rewritten without them; None when no row matched (nothing committed).

        Raises:
            WriteConflict: a commit landed after the version read. DalError: delta-rs refused it.
        """
        dl = _dl()
        opts, location, base = self.opts, self.location, self.base
        assert opts.where is not None and base is not None
        if base == NO_TABLE or int(open_table(location, opts.storage_options).version()) != base:
            raise _conflict(location, base)  # never delete from less than what is there now
        table = open_table(location, opts.storage_options, base)
        try:
            metrics = table.delete(
                to_delta_sql(opts.where, _arrow_schema(table)),
                writer_properties=dl.WriterProperties(compression=_DELTA_RS_CODECS[opts.compression]),
                commit_properties=_props(opts, base),
            )
        except dl.exceptions.CommitFailedError as e:
            raise _conflict(location, base) from e
        except Exception as e:
            raise translate(e, f"deleting rows of Delta table {location}", local=uris.is_local(location)) from e
        if not int(metrics.get("num_deleted_rows", 0)) and not int(metrics.get("num_removed_files", 0)):
            return None  # no row matched: delta-rs committed nothing
        return find_commit(location, opts)

    def landed(self) -> int | None:
        try:
            return find_commit(self.location, self.opts)
        except (DalError, OSError):
            return None

    def spark_options(self) -> dict[str, str] | None:
        if self.base is not None:
            # an overwrite of an existing table is staged and committed by ``commit``, which commits only on
            # ``base``: delta-spark's writer starts its own transaction at whatever version is newest when it
            # runs and lets a blind append that lands meanwhile through, so it cannot refuse an overwrite
            # that another writer's commit overtook (never publish less than you read)
            return None
        options = {
            "userMetadata": json.dumps(dict(self.opts.commit_metadata), sort_keys=True),
            "compression": _SPARK_CODECS.get(self.opts.compression, self.opts.compression),
        }
        if self.opts.schema_mode == "merge":
            options["mergeSchema"] = "true"
        elif self.opts.schema_mode == "overwrite":
            options["overwriteSchema"] = "true"
        return options

    def native_commit(self) -> int:
        return find_commit(self.location, self.opts)
