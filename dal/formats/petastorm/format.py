"""Petastorm datasets (Parquet + a pickled Unischema), read and written without petastorm itself.

Versions: Petastorm has none, so each dal version of a dataset written by dal is a complete Petastorm
dataset in its own directory ``<location>/v<n>-<token>/``. An append links (local disk) or server-side
copies (object stores) the previous version's files and adds new ones — no file is ever rewritten; an
overwrite starts empty. The commit point is one small record, ``<location>/_dal_versions/<n>.json``
(directory, mode, time, the dataset's name, and every file with its size, rows and row groups), published
whole and only if absent (written to a hidden temporary file then hard-linked locally, one conditional PUT
on object stores), so no reader ever sees it half-written: a writer that finds ``n`` taken moves its new
files to ``v<n+1>-<token>`` and tries again, so concurrent appenders both land and neither loses rows,
and a killed writer leaves an unrecorded directory that no reader sees. There is no rename, so the same
protocol runs on local disk, S3, GCS, Azure and fsspec stores. Petastorm readers open the version's
directory (``Dataset.petastorm_url``).

A dataset petastorm wrote (``dal.register``) is adopted as version 0 at its own directory, untouched.

A damaged record (an older dal killed or out of space while writing one, or a hand edit) is a
``FormatError`` naming the file. It is skipped as an *abandoned commit* — its number is never reused and
no reader or writer looks at it again — only when that cannot lose committed data: it is older than
``ABANDONED_AFTER_S`` (no writer can still be finishing it) and it is empty (it never described anything)
or no ``v<n>-*`` directory of that number still holds a ``_common_metadata`` (its files are gone).

The package by concern: ``format`` (``PetastormFormat``: versions described, files listed, gc), ``records``
(the version records, reading and judging them), ``commit`` (the commit protocol and ``PetastormWrite``),
``encode`` (values checked and encoded, Parquet files and ``_common_metadata`` written), ``unischema``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dal import progress
from dal.catalog.types import Schema, VersionDraft, VersionInfo, diff_schemas
from dal.errors import DalError, FormatError, SchemaMismatch, WriteConflict
from dal.formats.base import (
    CATALOG_KEY,
    WRITER_CATALOG,
    DataFile,
    Format,
    Recorded,
    Retention,
    WriteOptions,
    WriteTransaction,
    check_time_column,
    plan_partitioning,
)
from dal.formats.described import Described
from dal.formats.directory import (
    FileEntry,
    aged_files,
    data_files,
    describe_files,
    partition_values,
    scan_directory,
)
from dal.formats.petastorm import commit as petastorm_commit
from dal.formats.petastorm.commit import PetastormWrite
from dal.formats.petastorm.encode import (
    encode,
)
from dal.formats.petastorm.records import (
    COMMON_METADATA,
    RECORDS,
    VERSION_DIR,
    Commit,
    committed_numbers,
    load_commit,
    read_commit,
    read_schema,
    record_name,
    version_schema,
)
from dal.storage import ownership, uris
from dal.storage.location import Location
from dal.storage.partitions import partition_dir
from dal.tensors.schema import TensorSchema, decode_table

if TYPE_CHECKING:
    from dal.formats.changes import ChangePlan


def _settle_schema(current: TensorSchema, given: TensorSchema | None, opts: WriteOptions, where: str) -> TensorSchema:
    """The schema a write to a dataset whose schema is ``current`` commits (see ``PetastormFormat.begin``)."""
    if opts.schema_mode == "overwrite":
        return given if given is not None else current
    if given is None:
        return current
    if opts.schema_mode == "merge":
        return _merged(current, given, opts.tensor_schema_inferred, where)
    before = current.to_catalog()
    if given.to_catalog() != before:
        d = diff_schemas(before, given.to_catalog(), 0, 1)
        what = [f"added {[f.name for f in d.added]}" if d.added else "", f"removed {[f.name for f in d.removed]}" if d.removed else "",
                f"changed {[c.name for c in d.changed]}" if d.changed else ""]  # fmt: skip
        hint = "schema_mode='merge' adds nullable fields; mode='overwrite', schema_mode='overwrite' replaces it"
        raise SchemaMismatch("the schema differs from the dataset's: " + "; ".join(w for w in what if w) + f" ({hint})")
    return given


def _merged(current: TensorSchema, given: TensorSchema, inferred: bool, where: str) -> TensorSchema:
    """``schema_mode='merge'``: the dataset's fields as they are, ``given``'s new ones added as nullable.

    Raises:
        SchemaMismatch: a field the caller wrote differs from the dataset's, or a new one is not nullable.
    """
    # fields the dataset has keep their definition (an inferred schema may describe them differently);
    # a schema the caller wrote must agree with it
    ours = {f.name: f for f in current}
    changed = [f.name for f in given if f.name in ours and f.to_catalog() != ours[f.name].to_catalog()]
    if changed and not inferred:
        raise SchemaMismatch(
            f"cannot merge into {where}: fields {changed} differ from the dataset's (a merge only adds fields; "
            "write with mode='overwrite', schema_mode='overwrite' to change them)"
        )
    added = [f for f in given if f.name not in ours]
    required = [f.name for f in added if not f.nullable and not inferred]
    if required:
        raise SchemaMismatch(
            f"cannot merge into {where}: new fields {required} are not nullable, but the rows already "
            "written have no value for them; declare them nullable=True"
        )
    fields = [*current, *(dataclasses.replace(f, nullable=True) for f in added)]
    return TensorSchema(current.name, fields)


class PetastormFormat(Format):
    """Petastorm datasets, byte-compatible with petastorm 0.13.1's make_reader / make_batch_reader."""

    name = "petastorm"
    needs_tensor_schema = True

    # -- where versions live ----------------------------------------------------------------------

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        loc = Location.of(location, storage_options)
        return bool(committed_numbers(loc)) or loc.exists(COMMON_METADATA)

    def _record(self, loc: Location, storage_version: int) -> Commit | None:
        """One version's record (one GET); None for version 0 of a dataset petastorm wrote (adopted, no record)."""
        try:
            return read_commit(loc, storage_version)
        except FormatError:
            adopted = storage_version == 0 and not loc.exists(record_name(0)) and loc.exists(COMMON_METADATA)
            if adopted:
                return None
            raise

    def native_url(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> str:
        """The version's own directory: petastorm's ``make_reader`` opens it."""
        from dal.storage import uris

        assert version.storage_version is not None
        loc = Location.of(location, storage_options)
        record = self._record(loc, version.storage_version)
        return uris.url(loc.child(record.directory if record is not None else ""))

    def external_location(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> str:
        """Each version is a complete dataset in its own directory."""
        return self.native_url(location, version, storage_options)

    # -- writing --------------------------------------------------------------------------------

    def begin(self, location: str, opts: WriteOptions, latest: VersionInfo | None) -> WriteTransaction:
        """Settle the write's TensorSchema and partitioning, refusing what does not fit before anything is written.

        Each version is a complete dataset directory, so a schema change is a version like any other:
        ``schema_mode=None`` writes the dataset's schema (a ``schema=`` given must be it); ``'merge'`` adds the
        new nullable fields of ``schema=`` (or of the Spark DataFrame) to the dataset's, and the files carried
        over from the previous version get them as nulls; ``'overwrite'`` (with ``mode='overwrite'``) replaces
        it. The partitioning follows ``dal.formats.base.plan_partitioning``, as for Delta: ``partition_by``
        left out keeps the dataset's on append and overwrite alike.
        """
        where = f"the Petastorm dataset {location}"
        given = opts.tensor_schema
        if latest is None:
            if given is None:
                raise DalError("format='petastorm' needs schema=TensorSchema(...) for a new dataset")
            schema = given
        else:
            current = TensorSchema.from_catalog(str(latest.properties.get("unischema", "Schema")), latest.schema)
            schema = _settle_schema(current, given, opts, where)
        for f in schema:
            try:
                f.storage_type()  # a scalar dtype without an Arrow type is refused here, naming the field
            except SchemaMismatch as e:
                raise SchemaMismatch(f"field {f.name!r}: {e}") from None
        current_parts = latest.partition_columns if latest is not None else None
        partition_by = plan_partitioning(current_parts, opts, schema.names, where)
        tensors = [c for c in partition_by if schema[c].shape != ()]
        if tensors:
            raise SchemaMismatch(f"cannot partition {where} by the tensor field(s) {', '.join(tensors)}")
        check_time_column(opts.time_column, schema.names, "a field of the schema")
        return PetastormWrite(location, dataclasses.replace(opts, tensor_schema=schema, partition_by=partition_by))

    def encode(
        self, schema: TensorSchema, columns: Mapping[str, Sequence[Any]], partition_by: Sequence[str]
    ) -> pa.Table:
        """Encode every field with its codec, checking dtype and shape first; nothing is written here
        (``dal.formats.petastorm.encode.encode``)."""
        return encode(schema, columns, partition_by)

    def write_tensors(
        self,
        location: str,
        schema: TensorSchema,
        table: pa.Table,
        *,
        mode: str,
        partition_by: Sequence[str],
        storage_options: Mapping[str, str] | None = None,
        dataset: str = "",
        compression: str = "snappy",
        token: str | None = None,
        metadata: Mapping[str, str] | None = None,
        base: int | EllipsisType | None = ...,
    ) -> int:
        """Commit an encoded table as the next version; return its number
        (``dal.formats.petastorm.commit.write_tensors``)."""
        return petastorm_commit.write_tensors(
            location, schema, table, mode=mode, partition_by=partition_by, storage_options=storage_options,
            dataset=dataset, compression=compression, token=token, metadata=metadata, base=base,
        )  # fmt: skip

    def start(self, location: str, storage_options: Mapping[str, str] | None = None, token: str | None = None) -> str:
        """A fresh directory name for a write (``dal.formats.petastorm.commit.start``)."""
        return petastorm_commit.start(location, storage_options, token)

    def commit(
        self,
        location: str,
        schema: TensorSchema,
        directory: str,
        new_files: Sequence[FileEntry],
        *,
        mode: str,
        storage_options: Mapping[str, str] | None = None,
        dataset: str = "",
        compression: str = "snappy",
        metadata: Mapping[str, str] | None = None,
    ) -> int:
        """Make ``directory``'s new files the next version (``dal.formats.petastorm.commit.commit``)."""
        return petastorm_commit.commit(
            location, schema, directory, new_files, mode=mode, storage_options=storage_options, dataset=dataset,
            compression=compression, metadata=metadata,
        )  # fmt: skip

    def compact(self, location: str, latest: VersionInfo, opts: WriteOptions, target_file_size: int) -> int | None:
        """The latest version's encoded rows (read back as stored, codecs untouched) rewritten as an overwrite:
        one file per partition value (``write_files``), a new version directory; older versions keep theirs.
        The version's rows are held in memory while they are rewritten."""
        assert latest.storage_version is not None
        loc = Location.of(location, opts.storage_options)
        record = self._record(loc, latest.storage_version)
        if record is None:
            raise DalError(f"{loc.uri} is a Petastorm dataset dal did not write (adopted): dal does not rewrite it")
        numbers = committed_numbers(loc)
        if numbers and numbers[-1] != record.version:  # committed since optimize synced: it compacts again
            raise WriteConflict(
                f"{loc.uri}: Petastorm version {numbers[-1]} was committed after version {record.version}, which "
                "this compaction read; nothing was committed"
            )
        parts = list(latest.partition_columns)
        groups = {partition_dir(partition_values(f.path)) for f in record.files}
        if len(record.files) <= max(1, len(groups)):
            return None  # one file per partition already
        schema = version_schema(loc, record)
        arrow = schema.arrow_schema()
        tables = []
        for f in record.files:
            t = pq.read_table(loc.path(f"{record.directory}/{f.path}"), filesystem=loc.fs)
            values = dict(partition_values(f.path))
            for c in parts:
                t = t.append_column(c, pa.array([values.get(c)] * t.num_rows, pa.string()).cast(arrow.field(c).type))
            tables.append(t.select(arrow.names).cast(arrow))
        table = pa.concat_tables(tables) if tables else arrow.empty_table()
        return self.write_tensors(
            location, schema, table, mode="overwrite", partition_by=parts, storage_options=opts.storage_options,
            dataset=opts.dataset, compression=opts.compression, token=opts.token, metadata=opts.commit_metadata,
            base=record.version,  # never publish less than it read: an append landed meanwhile is a WriteConflict
        )  # fmt: skip

    def described(self, location: str, storage_options: Mapping[str, str]) -> Described:
        """What dal's writes recorded in the version records (``dal.formats.described``); nothing for a dataset
        petastorm wrote (no records)."""
        loc = Location.of(location, storage_options)
        commits = [c for n in committed_numbers(loc) if (c := load_commit(loc, n)) is not None]
        if not commits:
            return Described()
        columns = version_schema(loc, commits[-1]).names
        return Described.of(((c.version, c.metadata) for c in commits), columns)

    def written_for(self, location: str, storage_options: Mapping[str, str]) -> str:
        """The catalog name the first version at ``location`` was written for ("" if unknown or none)."""
        loc = Location.of(location, storage_options)
        numbers = committed_numbers(loc)
        for n in numbers:
            commit = load_commit(loc, n)
            if commit is not None:
                return commit.dataset
        return ""

    def abort(self, location: str, directory: str, storage_options: Mapping[str, str] | None = None) -> None:
        """Remove an uncommitted write's directory."""
        petastorm_commit.abort(location, directory, storage_options)

    # -- describing versions ----------------------------------------------------------------------

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
        loc = Location.of(location, storage_options)
        numbers = committed_numbers(loc)
        if not numbers and loc.exists(COMMON_METADATA):
            return [_adopted(loc)] if after is None else []  # a legacy layout: adopted once, as version 0
        label = f"reading the Petastorm records of {uris.mask_url(location)}"
        # a number without a record below the newest one: a version dal gc removed (records are created one
        # after another, an abandoned commit keeps its record). Recorded as expired, so that a re-adopted
        # dataset keeps its numbering and says why those versions cannot be read.
        start = 0 if after is None else after + 1
        removed = sorted(set(range(start, numbers[-1])) - set(numbers)) if numbers else []
        gone, pending = set(removed), []
        drafts: list[VersionDraft] = []
        for n in progress.each(sorted([n for n in numbers if n >= start] + removed), label, unit="versions"):
            if n in gone:
                pending.append(n)
                continue
            record = load_commit(loc, n)
            if record is None:  # an abandoned commit: no version
                continue
            drafts += [_removed(x, record.committed_at) for x in pending]
            draft = _described(loc, n, record, previous, after_removed=bool(pending or drafts))
            pending = []
            drafts.append(draft)
            previous = draft.schema
        return drafts + [_removed(x, None) for x in pending]

    # -- reading ----------------------------------------------------------------------------------

    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        assert version.storage_version is not None
        loc = Location.of(location, storage_options)
        record = self._record(loc, version.storage_version)
        if record is None:  # adopted: list the directory (footers are read when the scan is planned)
            return [DataFile(loc.child(rel), size, None, partition_values(rel)) for rel, size in data_files(loc)]
        return [
            DataFile(loc.child(f"{record.directory}/{f.path}"), f.size, f.rows, partition_values(f.path))
            for f in record.files
        ]

    def changes(
        self,
        location: str,
        storage_options: Mapping[str, str],
        versions: Sequence[VersionInfo],
        since: VersionInfo | None,
    ) -> ChangePlan:
        """From the version records of the range (``dal.formats.petastorm.changes``)."""
        from dal.formats.petastorm.changes import plan_changes

        return plan_changes(versions[0].dataset if versions else "", location, storage_options, versions, since)

    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        return TensorSchema.from_catalog("schema", version.schema).arrow_schema()

    # -- retention ------------------------------------------------------------------------------------

    def owns(self, rel: str) -> bool:
        """The version directories, the version records and a ``_common_metadata`` at the root."""
        parts = rel.split("/")
        if parts[0] == RECORDS or rel == COMMON_METADATA:
            return True
        return len(parts) > 1 and VERSION_DIR.fullmatch(parts[0]) is not None

    def is_record(self, rel: str) -> bool:
        return rel.startswith(f"{RECORDS}/") or rel == COMMON_METADATA

    def garbage(
        self,
        dataset: str,
        location: str,
        storage_options: Mapping[str, str],
        expiring: Sequence[VersionInfo],
        kept: Sequence[VersionInfo],
        retention: Retention,
    ) -> list[tuple[str, int]]:
        """Whole version directories (and the records of expiring versions). A directory no record names goes
        unless a write in flight claims it (``retention.claimed``): at once when its number is an expiring
        version's (a gc killed after deleting that record left it), else once every file in it is abandoned
        (``retention.abandoned``: its newest file ``safe_age`` old). A damaged record keeps every directory of
        its number."""
        loc = Location.of(location, storage_options)
        numbers = committed_numbers(loc)
        if not numbers:
            return []  # a dataset petastorm wrote (adopted): its only version is the root directory
        expiring_numbers = {v.storage_version for v in expiring} - {v.storage_version for v in kept}
        referenced, doomed_dirs, doomed_records = _judge_records(loc, numbers, expiring_numbers)
        by_dir: dict[str, list[tuple[str, int, float]]] = {}
        for rel, size, age in aged_files(loc):
            top = rel.split("/", 1)[0]
            if "/" in rel and VERSION_DIR.fullmatch(top):
                by_dir.setdefault(top, []).append((rel, size, age))
        out: list[tuple[str, int]] = []
        for d, files in by_dir.items():
            if d in referenced or any(d.startswith(p) for p in referenced if p.endswith("-")):
                continue
            if d not in doomed_dirs and not _unrecorded_dir_goes(d, files, expiring_numbers, retention):
                continue
            out += [(r, s) for r, s, _a in files]
        sizes = dict(loc.list(RECORDS, recursive=False))
        out += [(r, sizes.get(r.split("/", 1)[1], 0)) for r in doomed_records]
        return sorted(out)

    def tidy(self, location: str, storage_options: Mapping[str, str], deleted: Sequence[str]) -> None:
        """The version directories gc emptied, only while empty (nothing behind a link, nothing written since, is
        removed; on object stores: the folder markers a store may keep for them)."""
        loc = Location.of(location, storage_options)
        for d in {r.split("/", 1)[0] for r in deleted if VERSION_DIR.fullmatch(r.split("/", 1)[0])}:
            if loc.local:
                ownership.remove_empty_dirs(Location.of(loc.child(d)))
            elif not any(True for _ in loc.list(d)):  # a store's folder markers; not files written meanwhile
                ownership.remove_tree(loc, d)


def _adopted(loc: Location) -> VersionDraft:
    """A Petastorm dataset without dal's records (``_common_metadata`` beside its files), as version 0."""
    tensors = read_schema(loc)
    draft = describe_files(scan_directory(loc), tensors.to_catalog(), previous=None, number=0)
    stamp = loc.fs.get_file_info(loc.path(COMMON_METADATA)).mtime
    committed = stamp.astimezone(UTC) if stamp is not None else datetime.now(UTC)
    return dataclasses.replace(draft, committed_at=committed, properties={"unischema": tensors.name, "path": ""})


def _described(loc: Location, n: int, record: Commit, previous: Schema | None, *, after_removed: bool) -> VersionDraft:
    """Version ``n`` from its record (``after_removed``: versions before it were removed or recorded, so a
    first-looking one is not a creation)."""
    tensors = version_schema(loc, record)
    draft = describe_files(record.files, tensors.to_catalog(), previous=previous, number=n)
    operation = draft.operation
    if operation == "create" and after_removed:  # versions before it were removed: not a creation
        operation = record.mode
    if operation == "append" and record.mode == "overwrite":
        operation = "overwrite"
    props = {"unischema": tensors.name, "path": record.directory}
    writer = record.metadata.get(CATALOG_KEY)
    if isinstance(writer, str) and writer:
        props[WRITER_CATALOG] = writer  # which catalog's dal wrote it: sync tells its own from others'
    return dataclasses.replace(draft, operation=operation, committed_at=record.committed_at, properties=props)


def _judge_records(
    loc: Location, numbers: Sequence[int], expiring_numbers: set[int | None]
) -> tuple[set[str], set[str], list[str]]:
    """(the directories records of kept versions name — ``v<n>-`` for every directory of a number whose record is
    damaged —, the directories of expiring versions, their records).

    Raises:
        DalError: an expiring version's record cannot be read (nothing may be deleted then).
    """
    referenced: set[str] = set()  # directories any record still names
    doomed_dirs: set[str] = set()
    doomed_records: list[str] = []
    for n in numbers:
        try:
            commit = load_commit(loc, n)
        except DalError as e:
            if n in expiring_numbers:
                raise DalError(f"cannot read the record of version {n} at {loc.uri} ({e}); nothing was deleted") from e
            commit = None
            referenced.add(f"v{n}-")  # a damaged record: keep every directory of that number
        if commit is None:
            continue
        if n in expiring_numbers:
            doomed_dirs.add(commit.directory)
            doomed_records.append(record_name(n))
        else:
            referenced.add(commit.directory)
    return referenced, doomed_dirs, doomed_records


def _unrecorded_dir_goes(
    d: str, files: Sequence[tuple[str, int, float]], expiring_numbers: set[int | None], retention: Retention
) -> bool:
    """Whether a version directory no record names (a killed writer's, a running one's, or a half-gc'd one) is
    deleted: never while a write in flight claims a file in it; at once when its number is an expiring version's,
    else once every file in it is abandoned."""
    if any(retention.claimed(r, a) for r, _s, a in files):
        return False
    expired = int(d[1:].split("-", 1)[0]) in expiring_numbers
    return expired or all(retention.abandoned(r, a) for r, _s, a in files)


def _removed(number: int, committed_at: datetime | None) -> VersionDraft:
    """A version whose record and files are gone (expired by ``dal gc``): recorded as unavailable, with the
    time of the next readable version (its own went with its record)."""
    return VersionDraft(
        operation="expired",
        schema=Schema(),
        row_count=0,
        storage_version=number,
        committed_at=committed_at,
        properties={"unavailable": f"Petastorm version {number}'s record and files are gone (expired by dal gc)"},
    )


__all__ = ["PetastormFormat", "PetastormWrite", "decode_table"]
