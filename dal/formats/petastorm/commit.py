"""Committing a Petastorm version: the write's directory, the previous version's files carried over, the
record published create-if-absent (the protocol of ``dal.formats.petastorm.format``), a version without the rows
a predicate matches (``change_rows``), and the ``PetastormWrite`` transaction.

Why one module: every way a Petastorm version is committed goes through ``commit`` (its base check, its
publish-or-retry loop, its cleanup); the writes that call it stay beside it so that a reader sees each path to a
published record in one file.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dal._testhooks import pause
from dal.errors import DalError, FormatError, SchemaMismatch, WriteConflict
from dal.formats.base import (
    WriteOptions,
    WriteTransaction,
)
from dal.formats.directory import (
    FileEntry,
    partition_values,
    vanished,
)
from dal.formats.inputs import check_rows
from dal.formats.petastorm.encode import (
    ROW_GROUP_ROWS,
    _as_tensors,
    _columns,
    _write_common_metadata,
    encode,
    write_files,
)
from dal.formats.petastorm.records import (
    ABANDONED_AFTER_S,
    COMMON_METADATA,
    FILE_ENTRY_SCHEMA,
    RECORDS,
    Commit,
    broken_version,
    committed_numbers,
    latest_commit,
    record_name,
    version_schema,
)
from dal.storage.location import Location
from dal.tensors.schema import TensorSchema

if TYPE_CHECKING:
    from dal.expr import Expr

_TEMPORARY_RECORD = re.compile(r"\.\d{20}\.json\.[0-9a-f]{12}\.tmp")  # Location.create_exclusive's, of a record


def write_tensors(
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
    """Commit an encoded table (files written with the Parquet codec ``compression``) as the next version;
    return its number. ``token``: what the write's directory name carries (its intent claims it); ``catalog``,
    ``base``: as ``commit`` takes them.

    Raises:
        FormatError: storage refused the files (disk full, permissions); nothing was committed.
    """
    directory = start(location, storage_options, token)
    loc = Location.of(location, storage_options)
    try:
        files = write_files(loc, directory, table, list(partition_by), compression=compression)
    except BaseException as e:
        loc.delete_dir(directory)
        if isinstance(e, OSError | RuntimeError):  # pyarrow: "file metadata is only available after writer close"
            raise FormatError(
                f"writing Petastorm files under {loc.child(directory)} failed ({_reason(e)}); nothing was committed"
            ) from e
        raise
    pause("petastorm-files-written")
    return commit(
        location, schema, directory, files, mode=mode, storage_options=storage_options, dataset=dataset,
        compression=compression, metadata=metadata, base=base,
    )  # fmt: skip


def base_version(location: str, storage_options: Mapping[str, str] | None = None) -> int | None:
    """The newest committed version at ``location`` now (None: none yet): what an overwrite or a compaction
    read, and commits on only if it is still the newest (``commit``'s ``base``)."""
    loc = Location.of(location, storage_options)
    latest = latest_commit(loc, committed_numbers(loc))
    return latest.version if latest is not None else None


def start(location: str, storage_options: Mapping[str, str] | None = None, token: str | None = None) -> str:
    """A fresh directory name for a write, ``v<next>-<token>`` (a random token unless given; nothing is
    created yet)."""
    loc = Location.of(location, storage_options)
    numbers = committed_numbers(loc)
    _refuse_adopted(loc, numbers)
    _sweep_temporary_records(loc)
    return f"v{numbers[-1] + 1 if numbers else 0}-{token or uuid.uuid4().hex[:12]}"


def _refuse_adopted(loc: Location, numbers: Sequence[int]) -> None:
    """Refuse writing into a dataset petastorm wrote (``numbers``: the committed versions, none there)."""
    if not numbers and loc.exists(COMMON_METADATA):
        raise DalError(
            f"{loc.uri} is a Petastorm dataset dal did not write (adopted as version 0); "
            "appending to it is not supported yet: write a new dataset"
        )


def commit(
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
    base: int | EllipsisType | None = ...,
) -> int:
    """Make ``directory``'s new files the next version: add the previous version's files (append) and a
    ``_common_metadata``, then publish the version record if no other writer took that number first.

    Never publishes less than it read: with ``base`` (the newest version when the writer began; None: none),
    the commit is made only while ``base`` is still the newest version, checked again before every attempt to
    publish (an overwrite or a compaction that another writer's commit overtook would drop that commit's rows
    from the newest version). Appends carry the newest version's files whatever it is, and need no ``base``.

    Raises:
        WriteConflict: another writer committed after ``base``; nothing was committed.
        FormatError: storage refused a step (disk full, permissions); nothing was committed and the
            write's directory is removed.
    """
    loc = Location.of(location, storage_options)
    state = _Publishing(directory, directory.rsplit("-", 1)[-1])
    try:
        while True:
            n = _publish_next(loc, state, schema, new_files, mode=mode, dataset=dataset, compression=compression,
                              metadata=metadata, base=base)  # fmt: skip
            if n is not None:
                return n
    except BaseException as e:
        return _failed(loc, state, e)


@dataclasses.dataclass
class _Publishing:
    """Where a commit stands: the write's directory now, its token, the directory of the version it is publishing
    (``v<n>-<token>``), and the number whose record it is creating (None: none yet)."""

    directory: str
    token: str
    target: str = ""
    publishing: int | None = None

    def __post_init__(self) -> None:
        self.target = self.target or self.directory


def _publish_next(
    loc: Location,
    state: _Publishing,
    schema: TensorSchema,
    new_files: Sequence[FileEntry],
    *,
    mode: str,
    dataset: str,
    compression: str,
    metadata: Mapping[str, str] | None,
    base: int | EllipsisType | None,
) -> int | None:
    """One attempt to publish the next version number: the write's directory moved to it, the previous version's
    files carried (append), ``_common_metadata`` written, the record created if absent. The number, or None when
    another writer took it first (its carried files removed: the caller tries the next).

    Raises:
        WriteConflict: another writer committed after ``base``.
    """
    numbers = committed_numbers(loc)
    _refuse_adopted(loc, numbers)
    latest = latest_commit(loc, numbers)
    if base is not ... and (latest.version if latest is not None else None) != base:
        assert latest is not None
        read = f"version {base}" if base is not None else "no version"
        raise WriteConflict(
            f"{loc.uri}: Petastorm version {latest.version} was committed while this {mode} ran (it read "
            f"{read}); nothing was committed, so no rows of that commit were lost: run it again"
        )
    n = numbers[-1] + 1 if numbers else 0  # an abandoned commit's number is never reused
    target = state.target = f"v{n}-{state.token}"
    _check_staged(loc, state.directory, new_files)
    if target != state.directory:  # another writer committed meanwhile: take the next number
        for f in new_files:
            loc.move(f"{state.directory}/{f.path}", f"{target}/{f.path}")
        loc.delete_dir(state.directory)
        state.directory = target
    kept = _carried(loc, latest, target, schema, compression) if latest is not None and mode == "append" else []
    files = tuple(sorted([*kept, *new_files], key=lambda f: f.path))
    _write_common_metadata(loc, target, schema, files)
    pause("petastorm-metadata-written")
    _check_staged(loc, target, [*files, FileEntry(COMMON_METADATA, 0, 0, 0)])  # all there, or nothing
    record = Commit(n, target, mode, datetime.now(UTC), files, dataset, dict(metadata or {}))
    state.publishing = n
    if loc.create_exclusive(record_name(n), record.to_json()):
        return n
    state.publishing = None
    for f in kept:
        loc.delete(f"{target}/{f.path}")
    loc.delete(f"{target}/{COMMON_METADATA}")
    return None


def _carried(loc: Location, latest: Commit, target: str, schema: TensorSchema, compression: str) -> list[FileEntry]:
    """An append's copy of the ``latest`` version's files under ``target`` (a merge: rewritten with the new fields
    null).

    Raises:
        FormatError: a file of ``latest`` is gone (published by an older dal without its files).
    """
    kept = list(latest.files)
    widen = _added_fields(loc, latest, schema) if kept else []
    carried = []
    for f in kept:
        source = f"{latest.directory}/{f.path}"
        try:
            if widen:  # a merge: the previous version's rows, the new fields null, in new files
                carried.append(_widened(loc, source, target, f, schema, widen, compression))
            else:
                loc.copy(source, f"{target}/{f.path}")
                carried.append(f)
        except FileNotFoundError as e:  # published by an older dal without its files
            raise broken_version(loc, latest.version, source) from e
    return carried


def _failed(loc: Location, state: _Publishing, e: BaseException) -> int:
    """After ``e`` stopped a commit: the version number when its record was published anyway (a failure on the way
    back after an object store took the PUT); otherwise its directories removed and ``e`` raised (a storage
    error as ``FormatError``), or its files kept when whether it was published cannot be told.

    Raises:
        FormatError, ``e``: the commit did not land (or may have).
    """
    publishing, target = state.publishing, state.target
    # a publish that failed on the way back (a timeout after an object store took the PUT) may
    # have committed: then its files must stay
    landed = _published(loc, publishing, target) if publishing is not None else False
    if landed is True and publishing is not None and isinstance(e, Exception):
        return publishing
    if landed is not False:
        if isinstance(e, Exception):
            raise FormatError(
                f"publishing Petastorm version {publishing} of {loc.uri} failed ({_reason(e)}) and whether "
                f"it was committed is unknown; its files in {loc.child(target)} are kept: `dal sync` "
                "records the version if it was committed"
            ) from e
        raise e
    loc.delete_dir(state.directory)
    loc.delete_dir(target)
    if isinstance(e, OSError):
        raise FormatError(
            f"committing Petastorm version to {loc.uri} failed ({_reason(e)}); nothing was committed"
        ) from e
    raise e


def change_rows(
    location: str,
    schema: TensorSchema,
    where: Expr,
    table: pa.Table | None,
    *,
    base: int | None,
    partition_by: Sequence[str],
    storage_options: Mapping[str, str] | None = None,
    dataset: str = "",
    compression: str = "snappy",
    token: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> int | None:
    """Commit the next version as version ``base`` without the rows ``where`` matches, plus the encoded ``table``'s
    rows (a partial overwrite; None: a delete). The files of ``base`` no row of which matches are carried as they
    are (copied into the new version's directory, as an append carries them), those with some rewritten without
    them. Returns the version, or None when no row matched and nothing was written (a delete).

    Raises:
        WriteConflict: ``base`` is not the newest version now (nothing was committed).
        FormatError: storage refused a step; nothing was committed.
    """
    loc = Location.of(location, storage_options)
    latest = _read(loc, base)
    directory = start(location, storage_options, token)
    try:
        kept, removed = _without(loc, latest, directory, where, schema.arrow_schema(), compression)
        if table is None and not removed:
            loc.delete_dir(directory)
            return None
        new = [] if table is None else write_files(loc, directory, table, list(partition_by), compression=compression)
    except BaseException as e:
        loc.delete_dir(directory)
        if isinstance(e, OSError):
            raise FormatError(f"writing Petastorm files under {loc.child(directory)} failed ({_reason(e)})") from e
        raise
    return commit(
        location, schema, directory, [*kept, *new], mode="overwrite", storage_options=storage_options,
        dataset=dataset, compression=compression, metadata=metadata, base=base,
    )  # fmt: skip


def _read(loc: Location, base: int | None) -> Commit:
    """The newest version, which must be ``base`` (the version a change read).

    Raises:
        WriteConflict: another version was committed after it.
    """
    latest = latest_commit(loc, committed_numbers(loc))
    if latest is None or latest.version != base:
        found = "no version" if latest is None else f"version {latest.version}"
        raise WriteConflict(
            f"{loc.uri}: Petastorm {found} is the newest, not version {base}, which this change read; nothing was "
            "committed: run it again"
        )
    return latest


def replace_staged(
    location: str,
    schema: TensorSchema,
    where: Expr,
    directory: str,
    staged: Sequence[FileEntry],
    *,
    base: int | None,
    storage_options: Mapping[str, str] | None = None,
    dataset: str = "",
    compression: str = "snappy",
    metadata: Mapping[str, str] | None = None,
) -> int:
    """A partial overwrite whose rows Spark's executors staged under ``directory`` (``staged``): commit the next
    version as version ``base`` without the rows ``where`` matches (its files carried or rewritten into
    ``directory``, as ``change_rows`` does), plus the staged files.

    Raises:
        WriteConflict: ``base`` is not the newest version now (nothing was committed).
    """
    loc = Location.of(location, storage_options)
    latest = _read(loc, base)
    kept, _removed = _without(loc, latest, directory, where, schema.arrow_schema(), compression)
    return commit(
        location, schema, directory, [*kept, *staged], mode="overwrite", storage_options=storage_options,
        dataset=dataset, compression=compression, metadata=metadata, base=base,
    )  # fmt: skip


def _without(
    loc: Location, latest: Commit, directory: str, where: Expr, storage: pa.Schema, compression: str
) -> tuple[list[FileEntry], int]:
    """``latest``'s files under ``directory`` (same paths) without the rows ``where`` matches: a file none of whose
    rows match is copied as it is, one whose rows all match is left out, the others rewritten with the rest. The
    entries, and how many rows were left out."""
    from dal.expr import to_arrow

    kept: list[FileEntry] = []
    removed = 0
    for f in latest.files:
        source = f"{latest.directory}/{f.path}"
        try:
            table = pq.read_table(loc.path(source), filesystem=loc.fs)
        except FileNotFoundError as e:  # published by an older dal without its files
            raise broken_version(loc, latest.version, source) from e
        rows = table
        for name, value in partition_values(f.path):  # petastorm keeps partition columns out of the files
            if name in storage.names and name not in rows.column_names:
                rows = rows.append_column(
                    name, pa.array([value] * rows.num_rows, pa.string()).cast(storage.field(name).type)
                )
        matches = to_arrow(where, rows.schema)
        rest = rows.filter(~matches | matches.is_null()).select(table.column_names)  # false or NULL: kept
        removed += table.num_rows - rest.num_rows
        if rest.num_rows == table.num_rows:
            loc.copy(source, f"{directory}/{f.path}")
            kept.append(f)
        elif rest.num_rows:
            full = f"{directory}/{f.path}"
            loc.makedirs(full.rsplit("/", 1)[0])
            collected: list[Any] = []
            pq.write_table(rest, loc.path(full), filesystem=loc.fs, row_group_size=ROW_GROUP_ROWS,
                           compression=compression, metadata_collector=collected)  # fmt: skip
            size = int(loc.fs.get_file_info(loc.path(full)).size or 0)
            kept.append(FileEntry(f.path, size, rest.num_rows, collected[0].num_row_groups))
    return kept, removed


def abort(location: str, directory: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Remove an uncommitted write's directory."""
    Location.of(location, storage_options).delete_dir(directory)


def _added_fields(loc: Location, latest: Commit, schema: TensorSchema) -> list[str]:
    """The fields of ``schema`` that the ``latest`` version does not have (a schema merge adds them)."""
    names = version_schema(loc, latest).names
    return [f.name for f in schema if f.name not in names]


def _widened(
    loc: Location,
    source: str,
    directory: str,
    entry: FileEntry,
    schema: TensorSchema,
    added: Sequence[str],
    compression: str,
) -> FileEntry:
    """``source`` (a file of the previous version) written again under ``directory`` at the same relative path
    with the ``added`` fields as nulls, in the schema's column order; the previous version's file is untouched.
    Petastorm readers need every field of ``_common_metadata`` in every file."""
    table = pq.read_table(loc.path(source), filesystem=loc.fs)
    storage = schema.arrow_schema()
    for name in added:
        field = storage.field(name).with_nullable(True)
        table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    order = [n for n in storage.names if n in table.column_names]
    table = table.select(order)
    full = f"{directory}/{entry.path}"
    loc.makedirs(full.rsplit("/", 1)[0])
    collected: list[Any] = []
    pq.write_table(
        table, loc.path(full), filesystem=loc.fs, row_group_size=ROW_GROUP_ROWS, compression=compression,
        metadata_collector=collected,
    )  # fmt: skip
    size = int(loc.fs.get_file_info(loc.path(full)).size or 0)
    return FileEntry(entry.path, size, table.num_rows, collected[0].num_row_groups)


def _sweep_temporary_records(loc: Location) -> None:
    """Remove the hidden temporary records (``.<record>.<token>.tmp``, local disk only) that writers killed
    before publishing left, once no writer can still be using them."""
    if not loc.local or os.path.islink(loc.path(RECORDS)):
        return  # never through a link
    now = time.time()
    for rel, _size in loc.list(RECORDS, recursive=False):
        if _TEMPORARY_RECORD.fullmatch(rel):
            path = loc.path(f"{RECORDS}/{rel}")
            try:
                if now - os.lstat(path).st_mtime >= ABANDONED_AFTER_S:
                    os.unlink(path)
            except OSError:
                pass  # gone meanwhile, or not ours to remove


def _published(loc: Location, n: int, directory: str) -> bool | None:
    """Whether version ``n``'s record exists and names ``directory`` (None: cannot tell)."""
    try:
        return Commit.from_json(loc.read(record_name(n))).directory == directory
    except FileNotFoundError:
        return False
    except Exception:
        return None


def _check_staged(loc: Location, directory: str, files: Sequence[FileEntry]) -> None:
    """Refuse to go on with a commit whose files under ``directory`` are not all there (one LIST).

    Raises:
        FormatError: some are gone (deleted while the write ran); the caller publishes nothing.
    """
    present = {rel for rel, _size in loc.list(directory)}
    gone = [f"{directory}/{f.path}" for f in files if f.path not in present]
    if gone:
        raise vanished(loc, gone, len(files))


def _reason(e: BaseException) -> str:
    """What storage said, in one line (``No space left on device``)."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    cause = e.__cause__ or e.__context__
    if isinstance(e, RuntimeError) and isinstance(cause, OSError):
        return _reason(cause)
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


class PetastormWrite(WriteTransaction):
    """One Petastorm version: rows encoded with the TensorSchema's codecs into Parquet files in the write's
    own directory (on this process or on Spark executors), then committed by publishing its record."""

    format_title = "Petastorm"
    record_schema = FILE_ENTRY_SCHEMA

    def __init__(self, location: str, opts: WriteOptions) -> None:
        super().__init__(location, opts)
        assert opts.tensor_schema is not None
        self.schema: TensorSchema = opts.tensor_schema
        self.directory = ""
        # an overwrite replaces what it saw when it began: it commits only if nothing was committed since (an
        # append acknowledged meanwhile would vanish from the newest version); appends carry whatever is newest
        self.base: int | EllipsisType | None = (
            base_version(location, opts.storage_options) if opts.mode == "overwrite" else ...
        )

    def check(self, schema: pa.Schema) -> pa.Schema:
        """The DataFrame's columns in the schema's order; nullable fields it lacks are written as nulls."""
        missing = [f.name for f in self.schema if f.name not in schema.names and not f.nullable]
        extra = [c for c in schema.names if c not in self.schema.names]
        if missing or extra:
            hint = " (schema_mode='merge' adds new columns as nullable fields)" if extra else ""
            raise SchemaMismatch(
                f"DataFrame does not match the schema: missing {missing}, not in the schema {extra}{hint}"
            )
        self.directory = start(self.location, self.opts.storage_options, self.opts.token)
        return pa.schema([schema.field(n) for n in self.schema.names if n in schema.names])

    def stage(self, batches: Iterable[pa.RecordBatch]) -> list[dict[str, Any]]:
        loc = Location.of(self.location, self.opts.storage_options)
        prefix, parts = f"part-{uuid.uuid4().hex[:8]}", list(self.opts.partition_by or ())
        out: list[FileEntry] = []
        for i, batch in enumerate(batches):
            columns = _as_tensors(self.schema, {n: batch.column(n).to_pylist() for n in batch.schema.names})
            table = encode(self.schema, columns, parts)
            out += write_files(
                loc, self.directory, table, parts, prefix=f"{prefix}-{i:04d}", compression=self.opts.compression
            )
        return [dataclasses.asdict(f) for f in out]

    def commit(self, records: Sequence[Mapping[str, Any]]) -> int:
        files = [FileEntry(str(r["path"]), int(r["size"]), int(r["rows"]), int(r["row_groups"])) for r in records]
        if self.opts.where is not None:  # a partial overwrite from Spark: the rows it does not replace are kept
            assert self.base is not ...
            return replace_staged(
                self.location, self.schema, self.opts.where, self.directory, files, base=self.base,
                storage_options=self.opts.storage_options, dataset=self.opts.dataset,
                compression=self.opts.compression, metadata=self.opts.commit_metadata,
            )  # fmt: skip
        return commit(
            self.location, self.schema, self.directory, files, mode=self.opts.mode,
            storage_options=self.opts.storage_options, dataset=self.opts.dataset, compression=self.opts.compression,
            metadata=self.opts.commit_metadata, base=self.base,
        )  # fmt: skip

    def abort(self) -> None:
        if self.directory:
            abort(self.location, self.directory, self.opts.storage_options)

    def prepare(self, data: Any) -> Any:
        """The rows encoded with the TensorSchema's codecs (every value checked), seen by the observer."""
        parts = tuple(self.opts.partition_by or ())
        table = encode(self.schema, _as_tensors(self.schema, _columns(data)), parts)  # validates every value first
        if self.observer is not None:
            self.observer.see(table)
        if self.opts.where is not None:  # a partial overwrite writes only rows it replaces
            check_rows(table, self.opts.where)
        return table

    def delete_rows(self) -> int | None:
        assert self.opts.where is not None and self.base is not ...
        return change_rows(
            self.location, self.schema, self.opts.where, None, base=self.base,
            partition_by=tuple(self.opts.partition_by or ()), storage_options=self.opts.storage_options,
            dataset=self.opts.dataset, compression=self.opts.compression, token=self.opts.token,
            metadata=self.opts.commit_metadata,
        )  # fmt: skip

    def write_prepared(self, prepared: Any) -> int:
        assert isinstance(prepared, pa.Table)
        if self.opts.where is not None:  # a partial overwrite: the rows it does not replace are kept
            assert self.base is not ...
            version = change_rows(
                self.location, self.schema, self.opts.where, prepared, base=self.base,
                partition_by=tuple(self.opts.partition_by or ()), storage_options=self.opts.storage_options,
                dataset=self.opts.dataset, compression=self.opts.compression, token=self.opts.token,
                metadata=self.opts.commit_metadata,
            )  # fmt: skip
            assert version is not None
            return version
        return write_tensors(
            self.location, self.schema, prepared, mode=self.opts.mode, partition_by=tuple(self.opts.partition_by or ()),
            storage_options=self.opts.storage_options, dataset=self.opts.dataset, compression=self.opts.compression,
            token=self.opts.token, metadata=self.opts.commit_metadata, base=self.base,
        )  # fmt: skip
