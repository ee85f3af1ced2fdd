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
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from catalog.types import Schema, VersionDraft, VersionInfo, diff_schemas
from dal import progress
from dal._testhooks import pause
from dal.errors import DalError, FormatError, SchemaMismatch, one_line
from dal.formats.base import (
    DataFile,
    Format,
    Retention,
    WriteOptions,
    WriteTransaction,
    check_time_column,
    plan_partitioning,
)
from dal.formats.directory import (
    FileEntry,
    aged_files,
    data_files,
    describe_files,
    partition_values,
    scan_directory,
    vanished,
)
from dal.formats.petastorm.unischema import ROW_GROUPS_PER_FILE_KEY, UNISCHEMA_KEY, dumps_unischema, loads_unischema
from dal.storage import ownership, uris
from dal.storage.location import Location
from dal.storage.partitions import partition_dir, split_by_partition
from dal.tensors.schema import TensorSchema, decode_table

COMMON_METADATA = "_common_metadata"
RECORDS = "_dal_versions"
VERSION_DIR = re.compile(r"v\d+-[0-9a-f]+")  # a version's directory, v<n>-<token>
ROW_GROUP_ROWS = 10_000
ABANDONED_AFTER_S = 60.0
FILE_ENTRY_SCHEMA = pa.schema(
    [("path", pa.string()), ("size", pa.int64()), ("rows", pa.int64()), ("row_groups", pa.int64())]
)


@dataclass(frozen=True)
class Commit:
    """The record that makes ``directory`` version ``version``."""

    version: int
    directory: str
    mode: str
    committed_at: datetime
    files: tuple[FileEntry, ...]
    dataset: str = ""  # the catalog name it was written for ("" when unknown)

    def to_json(self) -> bytes:
        body: dict[str, Any] = {
            "version": self.version,
            "directory": self.directory,
            "mode": self.mode,
            "committed_at": self.committed_at.isoformat(),
            "files": [dataclasses.asdict(f) for f in self.files],
        }
        if self.dataset:
            body["dataset"] = self.dataset
        return json.dumps(body, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Commit:
        try:
            body = json.loads(data)
            return cls(
                int(body["version"]),
                str(body["directory"]),
                str(body["mode"]),
                datetime.fromisoformat(body["committed_at"]),
                tuple(
                    FileEntry(str(f["path"]), int(f["size"]), int(f["rows"]), int(f["row_groups"]))
                    for f in body["files"]
                ),
                str(body.get("dataset", "")),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise FormatError(f"malformed dal version record: {e}") from e


def record_name(n: int) -> str:
    return f"{RECORDS}/{n:020d}.json"


def committed_numbers(loc: Location) -> list[int]:
    """The committed version numbers under ``loc`` (one LIST)."""
    out = []
    for rel, _size in loc.list(RECORDS, recursive=False):
        stem = rel.removesuffix(".json")
        if rel.endswith(".json") and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def read_commit(loc: Location, n: int) -> Commit:
    """Version ``n``'s record.

    Raises:
        FormatError: it is missing or damaged (naming the file and what to do).
    """
    commit = load_commit(loc, n)
    if commit is None:
        raise FormatError(
            f"Petastorm version {n} of {loc.uri} was never completed: its record {loc.child(record_name(n))} "
            "is an abandoned commit (damaged, and no data of it is left)"
        )
    return commit


def load_commit(loc: Location, n: int) -> Commit | None:
    """Version ``n``'s record, or None when it is an abandoned commit (see the module's notes).

    Raises:
        FormatError: missing, or damaged in a way that skipping it could lose data (naming the file and the way out),
            or naming a directory or file outside the dataset's root.
    """
    rel = record_name(n)
    try:
        data = loc.read(rel)
    except FileNotFoundError:
        raise FormatError(f"Petastorm version {n} of {loc.uri} is missing ({loc.child(rel)})") from None
    try:
        commit = Commit.from_json(data)
    except FormatError as e:
        problem = str(e).removeprefix("malformed dal version record: ") or "no content"
    else:
        return _confined(loc, rel, commit)  # FormatError for a directory or file outside the root
    where = loc.child(rel)
    what = "empty" if not data.strip() else f"damaged ({problem})"
    stamp = loc.fs.get_file_info(loc.path(rel)).mtime
    age = time.time() - stamp.timestamp() if stamp is not None else ABANDONED_AFTER_S
    if age < ABANDONED_AFTER_S:
        raise FormatError(
            f"the version record {where} is {what} and was written {age:.0f} s ago: an older dal may still be "
            f"writing it. If no writer is running, dal treats it as an abandoned commit {ABANDONED_AFTER_S:.0f} s "
            "after it was written: try again then"
        )
    if not data.strip():
        return None  # never described anything: nobody can have read or recorded it
    kept = _directories_with_data(loc, n)
    if not kept:
        return None  # its files are gone: nothing to lose
    raise FormatError(
        f"the version record {where} is {what} but its data is still in {', '.join(loc.child(d) for d in kept)}, "
        f"so dal will not guess which files version {n} holds. Restore the record from a backup; or, to give "
        f"version {n} up, delete that directory: dal then skips the record as an abandoned commit"
    )


def _confined(loc: Location, rel: str, commit: Commit) -> Commit:
    """``commit`` when its directory and every file it lists lie under the dataset's root.

    Raises:
        FormatError: naming the dataset and the record (``dal.storage.ownership``: dal reads nothing outside)."""
    table = f"{loc.uri}: the version record {rel}"
    ownership.below(loc.uri, commit.directory, table=table, entry='its "directory"', encoded=False)
    for f in commit.files:
        ownership.below(loc.uri, f"{commit.directory}/{f.path}", table=table, entry="a file it lists", encoded=False)
    return commit


def _directories_with_data(loc: Location, n: int) -> list[str]:
    """The ``v<n>-*`` directories under ``loc`` that hold a ``_common_metadata``."""
    selector = pafs.FileSelector(loc.path(), recursive=False, allow_not_found=True)
    names = [i.base_name for i in loc.fs.get_file_info(selector) if i.type == pafs.FileType.Directory]
    return sorted(d for d in names if d.startswith(f"v{n}-") and loc.exists(f"{d}/{COMMON_METADATA}"))


def latest_commit(loc: Location, numbers: Sequence[int]) -> Commit | None:
    """The newest record among ``numbers`` that is not an abandoned commit (None: no version yet)."""
    for n in reversed(numbers):
        commit = load_commit(loc, n)
        if commit is not None:
            return commit
    return None


def read_schema(loc: Location, directory: str = "") -> TensorSchema:
    """The Unischema of a Petastorm dataset directory (restricted unpickling).

    Raises:
        FormatError: no ``_common_metadata`` or no Unischema in it (not a Petastorm dataset).
    """
    rel = f"{directory}/{COMMON_METADATA}" if directory else COMMON_METADATA
    where = loc.child(directory)
    if not loc.exists(rel):
        raise FormatError(f"{where} is not a Petastorm dataset: it has no {COMMON_METADATA}")
    try:
        stored = pq.read_schema(loc.path(rel), filesystem=loc.fs)
    except (pa.ArrowException, OSError) as e:  # truncated or not Parquet at all
        raise FormatError(f"{loc.child(rel)} is damaged ({one_line(e)}); restore it from a backup") from e
    meta = stored.metadata or {}
    if UNISCHEMA_KEY not in meta:
        raise FormatError(
            f"{where} has no Petastorm schema ({UNISCHEMA_KEY.decode()}) in {COMMON_METADATA}; "
            "register it with format='parquet' if it is plain Parquet"
        )
    return loads_unischema(meta[UNISCHEMA_KEY], stored)


def _settle_schema(current: TensorSchema, given: TensorSchema | None, opts: WriteOptions, where: str) -> TensorSchema:
    """The schema a write to a dataset whose schema is ``current`` commits (see ``PetastormFormat.begin``)."""
    if opts.schema_mode == "overwrite":
        return given if given is not None else current
    if given is None:
        return current
    before = current.to_catalog()
    if opts.schema_mode == "merge":
        # fields the dataset has keep their definition (an inferred schema may describe them differently);
        # a schema the caller wrote must agree with it
        ours = {f.name: f for f in current}
        changed = [f.name for f in given if f.name in ours and f.to_catalog() != ours[f.name].to_catalog()]
        if changed and not opts.tensor_schema_inferred:
            raise SchemaMismatch(
                f"cannot merge into {where}: fields {changed} differ from the dataset's (a merge only adds fields; "
                "write with mode='overwrite', schema_mode='overwrite' to change them)"
            )
        added = [f for f in given if f.name not in ours]
        required = [f.name for f in added if not f.nullable and not opts.tensor_schema_inferred]
        if required:
            raise SchemaMismatch(
                f"cannot merge into {where}: new fields {required} are not nullable, but the rows already "
                "written have no value for them; declare them nullable=True"
            )
        fields = [*current, *(dataclasses.replace(f, nullable=True) for f in added)]
        return TensorSchema(current.name, fields)
    if given.to_catalog() != before:
        d = diff_schemas(before, given.to_catalog(), 0, 1)
        what = [f"added {[f.name for f in d.added]}" if d.added else "", f"removed {[f.name for f in d.removed]}" if d.removed else "",
                f"changed {[c.name for c in d.changed]}" if d.changed else ""]  # fmt: skip
        hint = "schema_mode='merge' adds nullable fields; mode='overwrite', schema_mode='overwrite' replaces it"
        raise SchemaMismatch("the schema differs from the dataset's: " + "; ".join(w for w in what if w) + f" ({hint})")
    return given


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
        """Encode every field with its codec, checking dtype and shape first; nothing is written here.

        A nullable field the data lacks is written as nulls (as Delta appends do).

        Raises:
            SchemaMismatch: a column that is not nullable is missing, one is extra, or a value has the wrong
                dtype/shape (names field and row).
        """
        columns = with_absent_nulls(schema, columns)
        missing = [f.name for f in schema if f.name not in columns]
        extra = [c for c in columns if c not in schema.names]
        if missing or extra:
            raise SchemaMismatch(
                "data does not match the schema: "
                + "; ".join(
                    p
                    for p in (f"missing {missing}" if missing else "", f"not in the schema {extra}" if extra else "")
                    if p
                )
            )
        bad_parts = [c for c in partition_by if c not in schema.names]
        if bad_parts:
            raise SchemaMismatch(f"partition_by names columns not in the schema: {bad_parts}")
        arrays = []
        for f in schema:
            values = columns[f.name]
            if not f.nullable:
                nulls = [i for i, v in enumerate(values) if v is None]
                if nulls:
                    raise SchemaMismatch(f"field {f.name!r}, row {nulls[0]}: None in a field that is not nullable")
            arrays.append(f.the_codec.encode(f.name, f.dtype_name, f.shape, list(values)))
        return pa.Table.from_arrays(arrays, schema=schema.arrow_schema())

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
    ) -> int:
        """Commit an encoded table (files written with the Parquet codec ``compression``) as the next version;
        return its number. ``token``: what the write's directory name carries (its intent claims it).

        Raises:
            FormatError: storage refused the files (disk full, permissions); nothing was committed.
        """
        directory = self.start(location, storage_options, token)
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
        return self.commit(
            location, schema, directory, files, mode=mode, storage_options=storage_options, dataset=dataset,
            compression=compression,
        )  # fmt: skip

    def start(self, location: str, storage_options: Mapping[str, str] | None = None, token: str | None = None) -> str:
        """A fresh directory name for a write, ``v<next>-<token>`` (a random token unless given; nothing is
        created yet)."""
        loc = Location.of(location, storage_options)
        numbers = committed_numbers(loc)
        self._refuse_adopted(loc, numbers)
        _sweep_temporary_records(loc)
        return f"v{numbers[-1] + 1 if numbers else 0}-{token or uuid.uuid4().hex[:12]}"

    def _refuse_adopted(self, loc: Location, numbers: Sequence[int]) -> None:
        """Refuse writing into a dataset petastorm wrote (``numbers``: the committed versions, none there)."""
        if not numbers and loc.exists(COMMON_METADATA):
            raise DalError(
                f"{loc.uri} is a Petastorm dataset dal did not write (adopted as version 0); "
                "appending to it is not supported yet: write a new dataset"
            )

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
    ) -> int:
        """Make ``directory``'s new files the next version: add the previous version's files (append) and a
        ``_common_metadata``, then publish the version record if no other writer took that number first.

        Raises:
            FormatError: storage refused a step (disk full, permissions); nothing was committed and the
                write's directory is removed.
        """
        loc = Location.of(location, storage_options)
        token = directory.rsplit("-", 1)[-1]
        target = directory
        publishing: int | None = None
        try:
            while True:
                numbers = committed_numbers(loc)
                self._refuse_adopted(loc, numbers)
                latest = latest_commit(loc, numbers)
                n = numbers[-1] + 1 if numbers else 0  # an abandoned commit's number is never reused
                target = f"v{n}-{token}"
                _check_staged(loc, directory, new_files)
                if target != directory:  # another writer committed meanwhile: take the next number
                    for f in new_files:
                        loc.move(f"{directory}/{f.path}", f"{target}/{f.path}")
                    loc.delete_dir(directory)
                    directory = target
                base = list(latest.files) if latest is not None and mode == "append" else []
                widen = _added_fields(loc, latest, schema) if latest is not None and base else []
                carried = []
                for f in base:
                    assert latest is not None
                    source = f"{latest.directory}/{f.path}"
                    try:
                        if widen:  # a merge: the previous version's rows, the new fields null, in new files
                            carried.append(_widened(loc, source, target, f, schema, widen, compression))
                        else:
                            loc.copy(source, f"{target}/{f.path}")
                            carried.append(f)
                    except FileNotFoundError as e:  # published by an older dal without its files
                        raise broken_version(loc, latest.version, source) from e
                base = carried
                files = tuple(sorted([*base, *new_files], key=lambda f: f.path))
                _write_common_metadata(loc, target, schema, files)
                pause("petastorm-metadata-written")
                _check_staged(loc, target, [*files, FileEntry(COMMON_METADATA, 0, 0, 0)])  # all there, or nothing
                record = Commit(n, target, mode, datetime.now(UTC), files, dataset)
                publishing = n
                if loc.create_exclusive(record_name(n), record.to_json()):
                    return n
                publishing = None
                for f in base:
                    loc.delete(f"{target}/{f.path}")
                loc.delete(f"{target}/{COMMON_METADATA}")
        except BaseException as e:
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
                raise
            loc.delete_dir(directory)
            loc.delete_dir(target)
            if isinstance(e, OSError):
                raise FormatError(
                    f"committing Petastorm version to {loc.uri} failed ({_reason(e)}); nothing was committed"
                ) from e
            raise

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
        if numbers and numbers[-1] != record.version:
            raise DalError(
                f"{loc.uri} has Petastorm version {numbers[-1]}, the catalog's latest is {record.version}: "
                "run `dal sync` first"
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
            dataset=opts.dataset, compression=opts.compression, token=opts.token,
        )  # fmt: skip

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
        Location.of(location, storage_options).delete_dir(directory)

    # -- describing versions ----------------------------------------------------------------------

    def snapshots(
        self,
        location: str,
        storage_options: Mapping[str, str],
        *,
        after: int | None,
        previous: Schema | None,
        partition_types: Mapping[str, pa.DataType] | None = None,
    ) -> list[VersionDraft]:
        loc = Location.of(location, storage_options)
        numbers = committed_numbers(loc)
        drafts = []
        if not numbers and loc.exists(COMMON_METADATA):
            if after is None:  # adopted once, as version 0
                tensors = read_schema(loc)
                draft = describe_files(scan_directory(loc), tensors.to_catalog(), previous=None, number=0)
                stamp = loc.fs.get_file_info(loc.path(COMMON_METADATA)).mtime
                committed = stamp.astimezone(UTC) if stamp is not None else datetime.now(UTC)
                drafts.append(
                    dataclasses.replace(
                        draft, committed_at=committed, properties={"unischema": tensors.name, "path": ""}
                    )
                )
            return drafts
        label = f"reading the Petastorm records of {uris.mask_url(location)}"
        # a number without a record below the newest one: a version dal gc removed (records are created one
        # after another, an abandoned commit keeps its record). Recorded as expired, so that a re-adopted
        # dataset keeps its numbering and says why those versions cannot be read.
        start = 0 if after is None else after + 1
        removed = sorted(set(range(start, numbers[-1])) - set(numbers)) if numbers else []
        gone, pending = set(removed), []
        for n in progress.each(sorted([n for n in numbers if n >= start] + removed), label, unit="versions"):
            if n in gone:
                pending.append(n)
                continue
            record = load_commit(loc, n)
            if record is None:  # an abandoned commit: no version
                continue
            drafts += [_removed(x, record.committed_at) for x in pending]
            tensors = version_schema(loc, record)
            draft = describe_files(record.files, tensors.to_catalog(), previous=previous, number=n)
            operation = draft.operation
            if operation == "create" and (pending or drafts):  # versions before it were removed: not a creation
                operation = record.mode
            if operation == "append" and record.mode == "overwrite":
                operation = "overwrite"
            pending = []
            props = {"unischema": tensors.name, "path": record.directory}
            drafts.append(
                dataclasses.replace(draft, operation=operation, committed_at=record.committed_at, properties=props)
            )
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
        referenced: set[str] = set()  # directories any record still names
        doomed_dirs: set[str] = set()
        doomed_records: list[str] = []
        for n in numbers:
            try:
                commit = load_commit(loc, n)
            except DalError as e:
                if n in expiring_numbers:
                    raise DalError(
                        f"cannot read the record of version {n} at {loc.uri} ({e}); nothing was deleted"
                    ) from e
                commit = None
                referenced.add(f"v{n}-")  # a damaged record: keep every directory of that number
            if commit is None:
                continue
            if n in expiring_numbers:
                doomed_dirs.add(commit.directory)
                doomed_records.append(record_name(n))
            else:
                referenced.add(commit.directory)
        by_dir: dict[str, list[tuple[str, int, float]]] = {}
        for rel, size, age in aged_files(loc):
            top = rel.split("/", 1)[0]
            if "/" in rel and VERSION_DIR.fullmatch(top):
                by_dir.setdefault(top, []).append((rel, size, age))
        out: list[tuple[str, int]] = []
        for d, files in by_dir.items():
            if d in referenced or any(d.startswith(p) for p in referenced if p.endswith("-")):
                continue
            if d not in doomed_dirs:  # no record names it: a killed writer's, a running one's, or a half-gc'd one
                if any(retention.claimed(r, a) for r, _s, a in files):
                    continue
                expired = int(d[1:].split("-", 1)[0]) in expiring_numbers
                if not expired and not all(retention.abandoned(r, a) for r, _s, a in files):
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


_TEMPORARY_RECORD = re.compile(r"\.\d{20}\.json\.[0-9a-f]{12}\.tmp")  # Location.create_exclusive's, of a record


def version_schema(loc: Location, record: Commit) -> TensorSchema:
    """The Unischema of a published version (its directory's ``_common_metadata``).

    Raises:
        FormatError: damaged, or gone (``broken_version``: the version was published without its files).
    """
    try:
        return read_schema(loc, record.directory)
    except FormatError:
        if loc.exists(f"{record.directory}/{COMMON_METADATA}"):
            raise
        raise broken_version(loc, record.version, f"{record.directory}/{COMMON_METADATA}") from None


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


def broken_version(loc: Location, n: int, rel: str) -> FormatError:
    """The error for a published version whose files are gone (an older dal published a write whose files a
    gc deleted meanwhile), with the way out: give the version up as an abandoned commit."""
    return FormatError(
        f"Petastorm version {n} of {loc.uri} is published but its files are gone ({loc.child(rel)} is missing: "
        "deleted while the write ran, by a gc of an older dal, or by hand). To give the version up and go on, "
        f"empty its record ({loc.child(record_name(n))}, e.g. `truncate -s 0` it, or upload an empty object in "
        f"its place); {ABANDONED_AFTER_S:.0f} s after that dal skips it as an abandoned commit and never reuses "
        "its number"
    )


def _reason(e: BaseException) -> str:
    """What storage said, in one line (``No space left on device``)."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    cause = e.__cause__ or e.__context__
    if isinstance(e, RuntimeError) and isinstance(cause, OSError):
        return _reason(cause)
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def write_files(
    loc: Location,
    directory: str,
    table: pa.Table,
    partition_by: list[str],
    prefix: str = "part",
    compression: str = "snappy",
) -> list[FileEntry]:
    """Write an encoded table under ``directory``, one file per partition value, with the Parquet codec
    ``compression`` (pyarrow's name); describe each file."""
    token = uuid.uuid4().hex
    groups = sorted(split_by_partition(table, partition_by), key=lambda kv: str(kv[0]))
    written = []
    for i, (values, part) in enumerate(groups):
        subdir = partition_dir(values)
        name = f"{prefix}-{i:05d}-{token}.parquet"
        rel = f"{subdir}/{name}" if subdir else name
        full = f"{directory}/{rel}"
        loc.makedirs(full.rsplit("/", 1)[0])
        collected: list[Any] = []
        # petastorm (like Spark) keeps partition columns out of the files
        pq.write_table(
            part.drop_columns(partition_by),
            loc.path(full),
            filesystem=loc.fs,
            row_group_size=ROW_GROUP_ROWS,
            compression=compression,
            metadata_collector=collected,
        )
        size = int(loc.fs.get_file_info(loc.path(full)).size or 0)
        written.append(FileEntry(rel, size, part.num_rows, collected[0].num_row_groups))
        progress.current().advance(part.num_rows, files=1, bytes=size)  # on a terminal's progress line only
    return written


def _write_common_metadata(loc: Location, directory: str, schema: TensorSchema, files: Sequence[FileEntry]) -> None:
    """``_common_metadata`` as petastorm's materialize_dataset leaves it: the Arrow schema of the data
    columns, the pickled Unischema and the row-group count of every file."""
    counts = {f.path: f.row_groups for f in files}
    parts = {k for f in files for k, _ in partition_values(f.path)}
    arrow = pa.schema([f for f in schema.arrow_schema() if f.name not in parts])
    arrow = arrow.with_metadata(
        {UNISCHEMA_KEY: dumps_unischema(schema), ROW_GROUPS_PER_FILE_KEY: json.dumps(counts).encode()}
    )
    loc.makedirs(directory)
    pq.write_metadata(arrow, loc.path(f"{directory}/{COMMON_METADATA}"), filesystem=loc.fs)


def _columns(data: Any) -> dict[str, list[Any]]:
    """Columns of Python/NumPy values from a pandas DataFrame, a dict of columns, or a list of row dicts."""
    if type(data).__module__.startswith("pandas.") and type(data).__name__ == "DataFrame":
        return {str(c): list(data[c]) for c in data.columns}
    if isinstance(data, dict):
        return {str(k): list(v) for k, v in data.items()}
    if isinstance(data, pa.Table | pa.RecordBatch):
        return {str(n): data.column(n).to_pylist() for n in data.schema.names}
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        names = list(data[0]) if data else []
        return {n: [r.get(n) for r in data] for n in names}
    raise DalError(
        f"cannot write {type(data).__name__} as petastorm: pass a pandas DataFrame, a dict of columns or row dicts"
    )


def with_absent_nulls(schema: TensorSchema, columns: Mapping[str, Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """``columns`` with every nullable field of ``schema`` they lack added as nulls (rows: the other columns')."""
    absent = [f.name for f in schema if f.nullable and f.name not in columns]
    if not absent or not columns:
        return dict(columns)
    rows = len(next(iter(columns.values())))
    return {**columns, **{n: [None] * rows for n in absent}}


def _as_tensors(schema: TensorSchema, columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Tensor values as NumPy arrays of the field's dtype (Arrow and Spark hand them over as nested lists).

    Raises:
        SchemaMismatch: a cell holds a null element (a tensor has no nulls), naming the field and the row.
    """
    for f in schema:
        if f.shape != () and f.name in columns:
            columns[f.name] = [
                v if v is None or isinstance(v, np.ndarray) else _tensor(f.name, f.dtype, row, v)
                for row, v in enumerate(columns[f.name])
            ]
    return columns


def _tensor(name: str, dtype: Any, row: int, value: Any) -> np.ndarray:
    if _holds_none(value):
        fill = "F.transform(col, lambda x: F.coalesce(x, F.lit(0)))"
        raise SchemaMismatch(
            f"field {name!r}, row {row}: the array holds a null element, which a tensor cannot store; fill the "
            f"nulls first (e.g. {fill}, or NaN for floats) or leave the whole cell null"
        )
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise SchemaMismatch(f"field {name!r}, row {row}: not an array of {np.dtype(dtype).name} ({e})") from None


def _holds_none(value: Any) -> bool:
    """Whether a nested list (as Arrow's ``to_pylist`` gives an array cell) holds a None at any depth."""
    if value is None:
        return True
    if isinstance(value, list | tuple):
        return any(_holds_none(v) for v in value)
    return False


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

    def check(self, schema: pa.Schema) -> pa.Schema:
        """The DataFrame's columns in the schema's order; nullable fields it lacks are written as nulls."""
        missing = [f.name for f in self.schema if f.name not in schema.names and not f.nullable]
        extra = [c for c in schema.names if c not in self.schema.names]
        if missing or extra:
            hint = " (schema_mode='merge' adds new columns as nullable fields)" if extra else ""
            raise SchemaMismatch(
                f"DataFrame does not match the schema: missing {missing}, not in the schema {extra}{hint}"
            )
        self.directory = PetastormFormat().start(self.location, self.opts.storage_options, self.opts.token)
        return pa.schema([schema.field(n) for n in self.schema.names if n in schema.names])

    def stage(self, batches: Iterable[pa.RecordBatch]) -> list[dict[str, Any]]:
        loc = Location.of(self.location, self.opts.storage_options)
        prefix, parts = f"part-{uuid.uuid4().hex[:8]}", list(self.opts.partition_by or ())
        out: list[FileEntry] = []
        for i, batch in enumerate(batches):
            columns = _as_tensors(self.schema, {n: batch.column(n).to_pylist() for n in batch.schema.names})
            table = PetastormFormat().encode(self.schema, columns, parts)
            out += write_files(
                loc, self.directory, table, parts, prefix=f"{prefix}-{i:04d}", compression=self.opts.compression
            )
        return [dataclasses.asdict(f) for f in out]

    def commit(self, records: Sequence[Mapping[str, Any]]) -> int:
        files = [FileEntry(str(r["path"]), int(r["size"]), int(r["rows"]), int(r["row_groups"])) for r in records]
        return PetastormFormat().commit(
            self.location, self.schema, self.directory, files, mode=self.opts.mode,
            storage_options=self.opts.storage_options, dataset=self.opts.dataset, compression=self.opts.compression,
        )  # fmt: skip

    def abort(self) -> None:
        if self.directory:
            PetastormFormat().abort(self.location, self.directory, self.opts.storage_options)

    def write(self, data: Any) -> int:
        fmt, parts = PetastormFormat(), tuple(self.opts.partition_by or ())
        table = fmt.encode(self.schema, _as_tensors(self.schema, _columns(data)), parts)  # validates every value first
        if self.observer is not None:
            self.observer.see(table)
        return fmt.write_tensors(
            self.location, self.schema, table, mode=self.opts.mode, partition_by=parts,
            storage_options=self.opts.storage_options, dataset=self.opts.dataset, compression=self.opts.compression,
            token=self.opts.token,
        )  # fmt: skip


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
