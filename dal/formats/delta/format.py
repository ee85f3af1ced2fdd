"""Delta Lake through delta-rs (``deltalake``): writes, per-version snapshots for the catalog, pinned reads."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from catalog.types import Schema, VersionDraft, VersionInfo
from dal import progress
from dal.errors import DalError, FormatError, SchemaMismatch, UnsupportedFeature, one_line, require, translate
from dal.formats.base import (
    DATASET_KEY,
    WRITE_ID_KEY,
    DataFile,
    Format,
    Retention,
    SparkSource,
    WriteOptions,
    WriteTransaction,
    check_time_column,
    plan_partitioning,
    replaces_schema,
)
from dal.formats.catalog_schema import from_arrow
from dal.formats.delta.staging import FILE_SCHEMA, write_files
from dal.formats.delta.stats import prunable_bounds
from dal.formats.delta.types import ConformedReader, check_writable, describe_mismatch
from dal.formats.directory import aged_files, missing_files, vanished
from dal.formats.footers import checked_rows, most_rows
from dal.formats.index import FileIndex
from dal.formats.logical import logical_schema, written_type
from dal.storage import ownership, uris
from dal.storage.location import Location
from dal.storage.partitions import PartitionValues, blank_partitions_as_null, partition_totals

# version property: why a recorded Delta version cannot be read (expired from the log, data files gone)
UNAVAILABLE_KEY = "unavailable"
# Delta reader features dal reads correctly; any other one a version needs makes ``open`` refuse it
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",  # physical -> logical names from the schema's field metadata (dal.formats.fragments)
        "deletionVectors",  # per-file masks from delta-rs, applied per row group (dal.formats.fragments)
        "timestampNtz",
        "v2Checkpoint",  # log replay is delta-rs's
        "vacuumProtocolCheck",  # constrains VACUUM only, not reads
        "variantType",
        "variantType-preview",
    }
)
COLUMN_MAPPING_KEY = "delta.columnMapping.physicalName"
# delta-rs tables of pinned versions, by the VersionInfo object that pins them (kept alive beside: the id is
# checked against the very object, so it never names another version)
_PINNED: OrderedDict[tuple[int, str], tuple[VersionInfo, dict[str, str], Any]] = OrderedDict()
_PINNED_LOCK = threading.Lock()


def _dl() -> Any:
    return require("deltalake", "delta")


def _opts(storage_options: Mapping[str, str]) -> dict[str, str] | None:
    return uris.object_store_options(storage_options)


def _check_location(location: str) -> str:
    """Refuse locations delta-rs cannot keep a table at between two calls."""
    if location.startswith("memory://"):
        raise DalError(
            "Delta tables cannot live on memory:// (delta-rs keeps a separate in-memory store per table object, "
            "so a written version would vanish); use format='petastorm' there, or a local path or object store"
        )
    return location


def _arrow_schema(table: Any) -> pa.Schema:
    return pa.schema(table.schema().to_arrow())


def _operation(entry: Mapping[str, Any], version: int, schema_changed: bool) -> str:
    op = str(entry.get("operation", "unknown"))
    mode = str(entry.get("operationParameters", {}).get("mode", "")).lower()
    if version > 0 and "REPLACE TABLE" in op:  # a schema overwrite that changed the partitioning (DeltaWrite.commit)
        return "overwrite"
    if version == 0 or op in ("CREATE TABLE", "CREATE OR REPLACE TABLE") or mode == "errorifexists":
        return "create"
    if op == "WRITE" and mode == "overwrite":
        return "overwrite"
    if schema_changed:
        return "schema-change"
    if op == "WRITE":
        return "append"
    return op.lower().replace(" ", "-")


class DeltaFormat(Format):
    """Delta tables read and written with delta-rs; no JVM involved."""

    name = "delta"
    spark_source = SparkSource("delta", "io.delta.tables.DeltaTable", "versionAsOf")

    def begin(self, location: str, opts: WriteOptions, latest: VersionInfo | None) -> WriteTransaction:
        _check_location(location)
        return DeltaWrite(location, opts)

    def written_for(self, location: str, storage_options: Mapping[str, str]) -> str:
        return str(_metadata(commit_info(location, 0, storage_options) or {}).get(DATASET_KEY, ""))

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        return bool(_dl().DeltaTable.is_deltatable(_check_location(location), storage_options=_opts(storage_options)))

    def _table(self, location: str, storage_options: Mapping[str, str], version: int | None = None) -> Any:
        _check_location(location)
        try:
            return _dl().DeltaTable(location, version=version, storage_options=_opts(storage_options))
        except Exception as e:  # delta-rs raises its own TableNotFoundError / DeltaError / OSError
            at = " (its latest version)" if version is None else f" at version {version}"
            unknown = sorted(_logged_reader_features(location, storage_options) - SUPPORTED_READER_FEATURES)
            if unknown:
                raise UnsupportedFeature(
                    f"cannot open Delta table {location}{at}: its protocol requires the reader feature(s) "
                    f"{', '.join(unknown)}, which neither delta-rs nor dal can read ({_short(e)})"
                ) from e
            raise FormatError(f"cannot open Delta table {location}{at}: {_short(e)}") from e

    def check_write(self, location: str, schema: pa.Schema, opts: WriteOptions) -> tuple[str, ...]:
        """Refuse (``SchemaMismatch``) a write that does not fit the table, before anything is written: types
        Delta cannot hold, the partitioning (``dal.formats.base.plan_partitioning``) and the schema against
        the table's. Returns the partition columns the new version is laid out by."""
        if not schema.names:
            raise SchemaMismatch(f"cannot write to the Delta table {location}: the data has no columns")
        check_writable(schema, location)  # types Delta cannot hold are refused before anything is written
        table = self._table(location, opts.storage_options) if self.exists(location, opts.storage_options) else None
        current_parts = tuple(table.metadata().partition_columns) if table is not None else None
        parts = plan_partitioning(current_parts, opts, schema.names, f"the Delta table {location}")
        nested = [
            f"{c} ({schema.field(c).type})"
            for c in parts
            if c in schema.names and pa.types.is_nested(schema.field(c).type)
        ]
        if nested:
            raise SchemaMismatch(
                f"cannot partition the Delta table {location} by {', '.join(nested)}: a partition column holds "
                "one plain value per directory, not a struct, list or map"
            )
        if table is None or replaces_schema(opts):
            return parts
        current = logical_schema(_arrow_schema(table))  # recorded columns as written (dal.formats.logical)
        missing, new, changed = describe_mismatch(current, schema)
        changed += [
            f"{f.name} ({f.type} -> {schema.field(f.name).type})"
            for f in _arrow_schema(table)
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
        if problems:
            verb = "append to" if opts.mode == "append" else "overwrite"
            hint = " (or schema_mode='overwrite' to replace the schema)" if opts.mode == "overwrite" else ""
            raise SchemaMismatch(f"cannot {verb} {location}: " + "; ".join(problems) + hint)
        return parts

    def write(self, location: str, data: pa.RecordBatchReader, opts: WriteOptions, parts: Sequence[str]) -> int:
        """Write local ``data`` with delta-rs as one version laid out by ``parts`` (from ``check_write``)."""
        dl = _dl()
        props = dl.CommitProperties(custom_metadata=dict(opts.commit_metadata))
        current = None
        if not replaces_schema(opts) and self.exists(location, opts.storage_options):
            current = _arrow_schema(self._table(location, opts.storage_options))
            data = _with_missing_columns(data, logical_schema(current))
        # an empty partition value is null to every reader (delta-rs, Spark, dal) and Hive: written where nulls go
        data = blank_partitions_as_null(data, parts)
        # unsigned -> signed, tensors -> binary, ns -> us, … refusing values that do not fit
        conformed = ConformedReader(data, current)
        # a target only when one was asked for: otherwise delta-rs's own default (the keyword left out)
        sizing = {} if opts.target_file_size is None else {"target_file_size": opts.target_file_size}
        try:
            dl.write_deltalake(
                location,
                progress.counted(conformed.reader),  # rows handed to delta-rs, on a terminal's progress line
                mode=opts.mode,
                # a schema overwrite may change the partitioning ([]: none); otherwise the table's, as checked
                partition_by=list(parts) if replaces_schema(opts) else (list(parts) or None),
                schema_mode=opts.schema_mode,
                storage_options=_opts(opts.storage_options),
                commit_properties=props,
                writer_properties=dl.WriterProperties(compression=_DELTA_RS_CODECS[opts.compression]),
                **sizing,
            )
        except (dl.exceptions.SchemaMismatchError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
            if conformed.error is not None:
                raise conformed.error from None
            raise SchemaMismatch(f"delta-rs refused the data for {location}: {one_line(e)}") from e
        except Exception as e:
            if conformed.error is not None:
                raise conformed.error from None
            # one line, masked, with a hint for an object store's error
            raise translate(e, f"writing Delta table {location}", local=uris.is_local(location)) from e
        return self.find_commit(location, opts)

    def compact(self, location: str, latest: VersionInfo, opts: WriteOptions, target_file_size: int) -> int | None:
        """delta-rs's ``optimize.compact``: one commit (``OPTIMIZE``, ``dataChange: false``) that adds the
        bin-packed files and removes the small ones; the old files stay for older versions until gc."""
        dl = _dl()
        table = self._table(location, opts.storage_options)
        if table.version() != latest.storage_version:
            raise DalError(
                f"{location} has Delta version {table.version()}, the catalog's latest is {latest.storage_version}: "
                "run `dal sync` first"
            )
        try:
            metrics = table.optimize.compact(
                target_size=target_file_size,
                commit_properties=dl.CommitProperties(custom_metadata=dict(opts.commit_metadata)),
                writer_properties=dl.WriterProperties(compression=_DELTA_RS_CODECS[opts.compression]),
            )
        except Exception as e:
            raise translate(e, f"compacting Delta table {location}", local=uris.is_local(location)) from e
        if not int(metrics.get("numFilesAdded", 0)) and not int(metrics.get("numFilesRemoved", 0)):
            return None  # already compact: delta-rs committed nothing
        return self.find_commit(location, opts)

    def find_commit(self, location: str, opts: WriteOptions) -> int:
        """The version our commit got (others may have committed after it), matched by its write id.

        Reads the commit files themselves: delta-rs's ``history()`` can label entries with the wrong
        version number while other writers commit concurrently (seen with two appending processes).
        """
        write_id = opts.commit_metadata.get(WRITE_ID_KEY)
        latest = self._table(location, opts.storage_options).version()
        for v in range(latest, max(-1, latest - 500), -1):
            info = _metadata(commit_info(location, v, opts.storage_options) or {})
            if write_id is None or info.get(WRITE_ID_KEY) == write_id:
                return v
        raise FormatError(f"committed to {location} but cannot find commit {write_id} in the last 500 versions")

    def snapshots(
        self,
        location: str,
        storage_options: Mapping[str, str],
        *,
        after: int | None,
        previous: Schema | None,
        partition_types: Mapping[str, pa.DataType] | None = None,
    ) -> list[VersionDraft]:
        """Every version after ``after``; versions the log no longer holds (expired, before the first one it
        can rebuild) are described as unavailable, a version missing or corrupt between readable ones is an
        error (never skipped: it could not be recorded afterwards)."""
        table = self._table(location, storage_options)
        latest = table.version()
        drafts: list[VersionDraft] = []
        expired: list[tuple[int, str | None]] = []
        readable_seen = False
        first = 0 if after is None else after + 1
        # adopting the whole history (register, a re-adoption after drop): versions whose data files are gone
        # (deleted by dal gc or a VACUUM) are recorded as unavailable, not as readable versions
        on_disk = self._data_paths(location, storage_options) if after is None else None
        label = f"reading the Delta log of {uris.mask_url(location)}"
        for v in progress.each(range(first, latest + 1), label, unit="versions"):  # a line on a terminal only
            try:
                table.load_as_version(v)
            except Exception as e:
                present = _commit_exists(location, v, storage_options)
                if readable_seen or (after is not None and present):  # a gap, or a corrupt commit after ours
                    raise FormatError(
                        f"{location}: Delta version {v} cannot be loaded ({_short(e)}), yet version {v - 1} "
                        "before it can: its commit is missing or corrupt, and dal will not skip it silently"
                    ) from e
                # before the oldest version the log can rebuild: expired by log cleanup, or a broken start
                expired.append((v, _short(e) if present else None))
                continue
            readable_seen = True
            actions = _commit_actions(location, v, storage_options)
            _check_paths(location, v, actions)  # every path the commit names lies under the table's root
            entry: dict[str, Any] = next(
                (a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), {}
            )
            if not _metadata(entry).get(WRITE_ID_KEY):  # another writer's statistics: checked against footers
                _check_counts(location, v, actions, storage_options)
            try:
                draft = self._describe(table, v, entry, previous, storage_options, on_disk)
            except DalError:
                raise
            except Exception as e:
                unsupported = sorted(set(table.protocol().reader_features or []) - SUPPORTED_READER_FEATURES)
                if unsupported:
                    raise UnsupportedFeature(
                        f"{location}: Delta version {v} needs the reader feature(s) {', '.join(unsupported)}, "
                        f"which neither delta-rs nor dal can read ({_short(e)})"
                    ) from e
                raise FormatError(f"{location}: cannot describe Delta version {v}: {_short(e)}") from e
            # expired versions take the time of the first readable one (theirs is gone with their commits)
            drafts += [_expired(x, why, v, draft.committed_at) for x, why in expired]
            expired = []
            drafts.append(draft)
            if UNAVAILABLE_KEY not in draft.properties:
                previous = draft.schema
        if expired:
            raise FormatError(f"{location}: Delta versions {expired[0][0]}..{expired[-1][0]} cannot be loaded")
        return drafts

    @staticmethod
    def _data_paths(location: str, storage_options: Mapping[str, str]) -> set[str]:
        """Every file below the table (paths relative to it), in one listing."""
        return {rel for rel, _size in Location.of(location, storage_options).list()}

    def _describe(
        self,
        table: Any,
        v: int,
        entry: Mapping[str, Any],
        previous: Schema | None,
        storage_options: Mapping[str, str],
        present: set[str] | None = None,
    ) -> VersionDraft:
        arrow = _arrow_schema(table)
        schema = from_arrow(logical_schema(arrow))  # recorded columns as written
        parts = tuple(table.metadata().partition_columns)
        actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
        where = f"{uris.mask_url(str(table.table_uri))} (Delta version {v})"
        for a in actions:  # checkpointed ones too, whose commits may be gone
            ownership.below(table.table_uri, a["path"], table=where, entry="an add action's path")
            _check_claim(where, a)
        rows = sum(a["num_records"] or 0 for a in actions)
        missing = None
        if present is not None:
            gone = [p for a in actions if "://" not in (p := unquote(a["path"])) and p not in present]
            if gone:
                missing = (
                    f"{len(gone)} data file(s) of Delta version {v} are gone (e.g. {gone[0]}): deleted by dal gc or "
                    "a VACUUM"
                )
        if any(a["num_records"] is None for a in actions):
            try:
                rows = self._count_without_stats(table, actions, storage_options)
            except FileNotFoundError as e:
                missing = f"a data file of Delta version {v} is missing ({_short(e)}); was it removed by VACUUM?"
        if "deletionVectors" in (table.protocol().reader_features or []):
            try:
                rows -= sum(len(d) for d in _deleted_rows(table).values())
            except Exception as e:
                if "not found" not in str(e).lower():
                    raise
                missing = missing or f"a deletion vector file of Delta version {v} is missing ({_short(e)})"
        ts = entry.get("timestamp")
        props: dict[str, Any] = {"delta_operation": str(entry.get("operation", "")), "delta_version": v}
        if missing:
            props[UNAVAILABLE_KEY] = missing
        return VersionDraft(
            operation="unavailable" if missing else _operation(entry, v, previous is not None and previous != schema),
            schema=schema,
            row_count=rows,
            file_count=len(actions),
            size_bytes=sum(a["size_bytes"] for a in actions),
            storage_version=v,
            committed_at=datetime.fromtimestamp(ts / 1000, UTC) if ts is not None else None,
            partition_columns=parts,
            partitions=partition_totals((_values(a, parts), a["num_records"] or 0, a["size_bytes"]) for a in actions)
            if parts
            else (),
            properties=props,
        )

    def _count_without_stats(
        self, table: Any, actions: list[dict[str, Any]], storage_options: Mapping[str, str]
    ) -> int:
        import pyarrow.parquet as pq

        fs, root = uris.filesystem(table.table_uri, storage_options)
        total = 0
        for a in actions:
            if a["num_records"] is not None:
                total += a["num_records"]
                continue
            rel = ownership.below(table.table_uri, a["path"], table=str(table.table_uri), entry="an add action's path")
            with fs.open_input_file(uris.join(root, rel)) as fh:
                total += checked_rows(pq.ParquetFile(fh).metadata, f"{uris.mask_url(table.table_uri)}: {rel}")
        return total

    def _pinned(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> Any:
        """delta-rs's table at the version ``version`` pins, loaded once per ``VersionInfo`` object (an opened
        ``Dataset`` asks for its schema, then its files: one log replay serves both)."""
        key = (id(version), location)
        with _PINNED_LOCK:
            held = _PINNED.get(key)
            if held is not None and held[0] is version and held[1] == dict(storage_options):
                _PINNED.move_to_end(key)
                return held[2]
        table = self._load_pinned(location, version, storage_options)
        with _PINNED_LOCK:
            _PINNED[key] = (version, dict(storage_options), table)
            while len(_PINNED) > 8:
                _PINNED.popitem(last=False)
        return table

    def _load_pinned(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> Any:
        where = f"{version.dataset} version {version.number} (Delta version {version.storage_version})"
        if version.storage_version is None:
            raise FormatError(f"{version.dataset} version {version.number} pins no Delta version")
        reason = version.properties.get(UNAVAILABLE_KEY)
        if reason:
            raise FormatError(f"{where} cannot be read: {reason}")
        dl = _dl()  # a missing extra is a MissingDependency naming it, not "delta-rs cannot load it"
        options = _opts(storage_options)  # a refused option is its own error, not "delta-rs cannot load it"
        try:
            table = dl.DeltaTable(location, version=version.storage_version, storage_options=options)
            features = set(table.protocol().reader_features or [])
        except Exception as e:
            raise FormatError(f"{where}: delta-rs cannot load it: {_short(e)}") from e
        unsupported = sorted(features - SUPPORTED_READER_FEATURES)
        if unsupported:
            raise UnsupportedFeature(
                f"{where} needs the Delta reader feature(s) {', '.join(unsupported)}, which dal cannot read "
                "correctly; it refuses rather than return wrong rows"
            )
        return table

    def files(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> list[DataFile]:
        return self.file_index(location, version, storage_options).data_files()

    def file_index(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> FileIndex:
        """The version's add actions as columns (paths confined below the table, sorted), with the statistics
        planning may prune by (``dal.formats.delta.stats.prunable_bounds``)."""
        table = self._pinned(location, version, storage_options)
        where = f"{version.dataset} version {version.number} (Delta version {version.storage_version})"
        try:
            parts = tuple(table.metadata().partition_columns)
            actions = pa.table(table.get_add_actions(flatten=True))
            schema = _arrow_schema(table)
        except Exception as e:
            raise FormatError(f"{where}: cannot list its data files: {_short(e)}") from e
        deleted: dict[str, tuple[int, ...]] = {}
        if "deletionVectors" in (table.protocol().reader_features or []):
            try:
                deleted = _deleted_rows(table)
            except Exception as e:
                raise FormatError(f"{where}: cannot read its deletion vectors: {_short(e)}") from e
        paths = ownership.below_all(location, actions.column("path"), table=where, entry="an add action's path")
        actions = actions.set_column(actions.column_names.index("path"), "path", paths)
        mapped = self.physical_schema(schema) is not None  # statistics then name physical columns: not used
        actions = prunable_bounds(actions, schema, parts, with_stats=not mapped)
        actions = actions.take(pc.sort_indices(actions.column("path")))  # deterministic order for planning
        return FileIndex(location, actions, parts, deleted)

    def external_location(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> str:
        """The table root, when this version's files are exactly the data files there and need no Delta
        reader features (a Hive table reads every Parquet file below its location as plain Parquet)."""
        listed = self.files(location, version, storage_options)
        if any(f.deleted_rows for f in listed) or self.physical_schema(
            self.arrow_schema(location, version, storage_options)
        ):
            raise UnsupportedFeature(
                f"{version.dataset} version {version.number} has Delta deletion vectors or column mapping: a Hive "
                "table reads its files as plain Parquet (deleted rows back, physical column names); read it with "
                "dal or delta-spark"
            )
        files = {f.uri for f in listed}
        fs, root = uris.filesystem(location, storage_options)
        present = {
            uris.join(location, os.path.relpath(i.path, root))
            for i in fs.get_file_info(pafs.FileSelector(root, recursive=True))
            if i.type == pafs.FileType.File and i.path.endswith(".parquet") and "/_delta_log" not in i.path
        }
        if present != files:
            raise DalError(
                f"{version.dataset} version {version.number}: its Delta directory also holds {len(present - files)} "
                "file(s) this version does not include (removed by a later overwrite, delete or optimize); a Hive "
                "table over the directory would read them. Vacuum the table, or read it through delta-spark"
            )
        return location

    def physical_schema(self, schema: pa.Schema) -> pa.Schema | None:
        """With column mapping, ``schema`` with each field named by its physical (Parquet) name."""
        if not any(f.metadata and COLUMN_MAPPING_KEY.encode() in f.metadata for f in schema):
            return None
        return physical_schema(schema)

    def arrow_schema(self, location: str, version: VersionInfo, storage_options: Mapping[str, str]) -> pa.Schema:
        return _arrow_schema(self._pinned(location, version, storage_options))

    # -- retention ------------------------------------------------------------------------------------

    def owns(self, rel: str) -> bool:
        """The log (and change data), Parquet data files, deletion vectors and checksum files."""
        parts = rel.split("/")
        base = parts[-1]
        if parts[0] in ("_delta_log", "_change_data"):
            return True
        return (
            base.endswith(".parquet")
            or (base.startswith("deletion_vector_") and base.endswith(".bin"))
            or (base.startswith(".") and base.endswith(".crc"))
        )

    def is_record(self, rel: str) -> bool:
        return rel.startswith("_delta_log/")

    def garbage(
        self,
        dataset: str,
        location: str,
        storage_options: Mapping[str, str],
        expiring: Sequence[VersionInfo],
        kept: Sequence[VersionInfo],
        retention: Retention,
    ) -> list[tuple[str, int]]:
        """Data files and deletion vectors no kept version needs (delta-rs's vacuum, as dal applies it: the
        files of expiring versions now, unreferenced ones once ``retention`` calls them abandoned: no write in
        flight claims them and they are ``safe_age`` old), and log entries (commits,
        checksums, checkpoints) of versions before the oldest kept one that are older than the table's
        ``delta.logRetentionDuration`` (30 days unless the table sets it: delta-rs's ``cleanup_metadata``
        rule). ``prepare_gc`` writes a checkpoint at the oldest kept version first when the log needs one,
        so every kept version stays loadable without the entries that go."""
        loc = Location.of(location, storage_options)
        needed: set[str] = set()
        for v in kept:
            try:
                files = self.files(location, v, storage_options)
            except DalError as e:
                raise DalError(
                    f"{dataset}: cannot tell which files kept version {v.number} needs ({e}); nothing was deleted"
                ) from e
            needed |= {r for f in files if (r := _below(loc, f.uri)) is not None}
        expired_files: set[str] = set()
        for v in expiring:
            try:
                expired_files |= {
                    r for f in self.files(location, v, storage_options) if (r := _below(loc, f.uri)) is not None
                }
            except DalError:
                continue  # unreadable already: its files are judged by age like any unreferenced file
        listed = aged_files(loc)
        kept_versions = sorted({v.storage_version for v in kept if v.storage_version is not None})
        gone_versions = sorted({v.storage_version for v in expiring if v.storage_version is not None})
        dv_needed, dv_committed = _deletion_vector_files(
            dataset, location, storage_options, kept_versions, gone_versions, listed
        )
        needed |= dv_needed
        unmatched = sorted(needed - {rel for rel, _s, _a in listed})
        if unmatched:  # a kept file not found by its name: never guess which listed file it is
            raise DalError(
                f"{dataset}: kept versions reference {len(unmatched)} file(s) gc cannot find at {loc.uri} "
                f"(e.g. {unmatched[0]}); nothing was deleted"
            )
        table = self._table(location, storage_options)
        cdf_on = str((table.metadata().configuration or {}).get("delta.enableChangeDataFeed", "")).lower() == "true"
        feed = _change_feed(location, storage_options, listed, kept_versions, gone_versions, cdf_on)
        out = _expired_log(table, listed, kept_versions)
        out += _orphaned_sidecars(location, storage_options, listed, {rel for rel, _s in out})
        going_cdc = {rel for rel, _s, age in listed if feed.doomed(rel, age, retention)}
        present = {rel for rel, _s, _a in listed}
        expired_files |= feed.removed_gone
        for rel, size, age in listed:
            parts = rel.split("/")
            if parts[0] == "_change_data":  # change data files (cdc actions) and their Hadoop checksums
                crc = _HIDDEN_CRC.fullmatch(parts[-1])
                twin = "/".join([*parts[:-1], crc.group(1)]) if crc else None
                if twin is not None and twin in present:  # a checksum goes with its file
                    if twin in going_cdc:
                        out.append((rel, size))
                elif rel in going_cdc or (twin is not None and feed.doomed(twin, age, retention)):
                    out.append((rel, size))
                continue
            if rel in feed.removed_kept:
                continue  # a kept commit's change feed reads it (its deletes, without cdc files)
            if _DV_FILE.fullmatch(parts[-1]) and parts[0] != "_delta_log":
                if rel not in needed and (rel in dv_committed or retention.abandoned(rel, age)):
                    out.append((rel, size))
                continue
            if parts[0] == "_delta_log" or not rel.endswith(".parquet") or any(p.startswith(("_", ".")) for p in parts):
                continue  # the log, and hidden files, are not data files (delta-rs vacuum skips them too)
            if rel in needed:
                continue
            if rel in expired_files or retention.abandoned(rel, age):
                out.append((rel, size))
        return sorted(out)

    def prepare_gc(
        self, location: str, storage_options: Mapping[str, str], kept: Sequence[VersionInfo], doomed: Sequence[str]
    ) -> None:
        """Before gc deletes log entries: a checkpoint at the oldest kept version unless one newer than every
        doomed entry (and not newer than that version) exists, written by delta-rs, so kept versions load."""
        gone = [v for rel in doomed if (v := _log_version(rel)) is not None]
        kept_versions = [v.storage_version for v in kept if v.storage_version is not None]
        if not gone or not kept_versions:
            return
        oldest = min(kept_versions)
        fs, root = uris.filesystem(location, storage_options)
        log = uris.join(root, "_delta_log")
        names = [i.base_name for i in fs.get_file_info(pafs.FileSelector(log, allow_not_found=True))]
        if any(max(gone) < c <= oldest for c in _checkpoints(names)):
            return
        try:
            self._table(location, storage_options, oldest).create_checkpoint()
        except DalError:
            raise
        except Exception as e:
            raise FormatError(f"{location}: cannot write a checkpoint at Delta version {oldest}: {_short(e)}") from e
        log_gc.debug("%s: wrote a checkpoint at Delta version %d before expiring older log entries", location, oldest)

    def tidy(self, location: str, storage_options: Mapping[str, str], deleted: Sequence[str]) -> None:
        """Local disk: the partition directories left empty (never the log's)."""
        ownership.remove_empty_dirs(Location.of(location, storage_options), lambda rel: not rel or "_delta_log" in rel)


# -- gc of the log and of deletion vectors -----------------------------------------------------------------

log_gc = logging.getLogger("dal.gc")
# log entries of one version: commit, checksum, checkpoint (classic, multi-part, v2 top-level), Hadoop .crc
_LOG_ENTRY = re.compile(
    r"\.?(\d{20})\.(?:json|crc|checkpoint(?:\.\d+\.\d+|\.[0-9a-fA-F-]{36})?\.(?:parquet|json))(?:\.crc)?"
)
_COMPACTED = re.compile(r"\.?\d{20}\.(\d{20})\.compacted\.json(?:\.crc)?")  # a range: its last version counts
_CLASSIC_CHECKPOINT = re.compile(r"(\d{20})\.checkpoint(?:\.\d+\.\d+)?\.parquet")
_DV_FILE = re.compile(r"deletion_vector_[0-9a-fA-F-]{36}\.bin")
_RETENTION = re.compile(r"\s*interval\s+(\d+)\s+(\w+?)s?\s*", re.IGNORECASE)
_UNIT_S = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1, "minute": 60, "hour": 3600,
           "day": 86400, "week": 604800}  # fmt: skip
LOG_RETENTION_DEFAULT_S = 30 * 86400.0  # Delta's default delta.logRetentionDuration
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _log_version(rel: str) -> int | None:
    """The version a log entry (``_delta_log/<name>``, not in a subdirectory) belongs to; None for anything
    else (``_last_checkpoint``, sidecars, staged commits)."""
    parts = rel.split("/")
    if len(parts) != 2 or parts[0] != "_delta_log":
        return None
    if m := _LOG_ENTRY.fullmatch(parts[1]):
        return int(m.group(1))
    if m := _COMPACTED.fullmatch(parts[1]):
        return int(m.group(1))
    return None


def _checkpoints(names: Iterable[str]) -> set[int]:
    """Versions with a complete-looking checkpoint among the log's file names (classic, multi-part, v2)."""
    out = set()
    for n in names:
        if n.startswith(".") or ".checkpoint." not in n or not n.endswith((".parquet", ".json")):
            continue
        if (m := _LOG_ENTRY.fullmatch(n)) is not None and not n.endswith(".crc"):
            out.add(int(m.group(1)))
    return out


def log_retention_s(configuration: Mapping[str, str]) -> float | None:
    """The table's ``delta.logRetentionDuration`` in seconds (Delta's default 30 days when unset); None
    when it cannot be read (then no log entry is deleted)."""
    text = configuration.get("delta.logRetentionDuration")
    if text is None:
        return LOG_RETENTION_DEFAULT_S
    m = _RETENTION.fullmatch(text)
    unit = _UNIT_S.get(m.group(2).lower()) if m else None
    return None if m is None or unit is None else int(m.group(1)) * unit


def _expired_log(table: Any, listed: Sequence[tuple[str, int, float]], kept: Sequence[int]) -> list[tuple[str, int]]:
    """Log entries of versions before the oldest kept one, older than the table's log retention."""
    if not kept:
        return []
    retention = log_retention_s(table.metadata().configuration or {})
    if retention is None:
        log_gc.warning("%s: unreadable delta.logRetentionDuration; no log entry is expired", table.table_uri)
        return []
    oldest = min(kept)
    return [
        (rel, size)
        for rel, size, age in listed
        if (v := _log_version(rel)) is not None and v < oldest and age >= retention
    ]


_COMMIT = re.compile(r"\d{20}\.json")
_V2_CHECKPOINT = re.compile(r"\d{20}\.checkpoint\.[0-9a-fA-F-]{36}\.(?:json|parquet)")


def _sidecars_named(fs: pafs.FileSystem, path: str) -> set[str] | None:
    """The sidecar files a v2 checkpoint names (file names in ``_delta_log/_sidecars``); None when it cannot
    be read or names one elsewhere (then no sidecar is judged unreferenced)."""
    try:
        if path.endswith(".json"):
            found = [a["sidecar"].get("path") for a in _actions(fs, path) if isinstance(a.get("sidecar"), dict)]
        else:
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(path, filesystem=fs)
            if "sidecar" not in pf.schema_arrow.names:
                return set()
            found = [a["path"] for a in pf.read(columns=["sidecar"]).column("sidecar").to_pylist() if a]
    except Exception as e:  # an unreadable checkpoint: keep every sidecar
        log_gc.warning("%s: cannot read its sidecar list (%s); no sidecar file is deleted", path, _short(e))
        return None
    names = {unquote(str(p)) for p in found}
    return None if any(not n or "/" in n for n in names) else names


def _orphaned_sidecars(
    location: str, storage_options: Mapping[str, str], listed: Sequence[tuple[str, int, float]], doomed: set[str]
) -> list[tuple[str, int]]:
    """Sidecar files (``_delta_log/_sidecars/``) of v2 checkpoints gc deletes that no remaining checkpoint
    names: they are part of the deleted checkpoint (Delta's metadata cleanup removes them too)."""
    checkpoints = [rel for rel, _s, _a in listed if rel.count("/") == 1 and _V2_CHECKPOINT.fullmatch(rel[11:])]
    going = [rel for rel in checkpoints if rel in doomed]
    if not going:
        return []
    fs, root = uris.filesystem(location, storage_options)
    named: dict[str, set[str] | None] = {rel: _sidecars_named(fs, uris.join(root, rel)) for rel in checkpoints}
    if any(v is None for v in named.values()):
        return []
    remaining = set().union(*(named[rel] or set() for rel in checkpoints if rel not in doomed))
    candidates = set().union(*(named[rel] or set() for rel in going)) - remaining
    return [
        (rel, size) for rel, size, _a in listed if rel.startswith("_delta_log/_sidecars/") and rel[21:] in candidates
    ]


_HIDDEN_CRC = re.compile(r"\.(.+)\.crc")


@dataclass
class _ChangeFeed:
    """What the change data feed of the kept versions needs, from the commits in the log: ``kept`` change data
    files (``cdc`` actions of commits from the oldest kept version on), ``old`` ones (named by older
    commits), ``gone`` ones (named by the commits of versions expiring now), and the data files kept commits
    without ``cdc`` actions remove (their deletes are read from those files: ``removed_kept``; those of
    expiring commits: ``removed_gone``). ``complete``: every commit from the oldest kept version on is in
    the log (else a change data file no commit names is not judged untracked)."""

    kept: set[str] = field(default_factory=set)
    old: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)
    removed_kept: set[str] = field(default_factory=set)
    removed_gone: set[str] = field(default_factory=set)
    complete: bool = False

    def doomed(self, rel: str, age: float, retention: Retention) -> bool:
        """A change data file (``_change_data/...``) gc deletes: named only by commits before the oldest kept
        version and expiring now (or abandoned by ``retention``), or named by no commit and abandoned."""
        if not rel.startswith("_change_data/") or rel in self.kept or _HIDDEN_CRC.fullmatch(rel.rsplit("/", 1)[-1]):
            return False
        if rel in self.gone:
            return True
        if rel in self.old:
            return retention.abandoned(rel, age)
        return self.complete and retention.abandoned(rel, age)


def _change_feed(
    location: str,
    storage_options: Mapping[str, str],
    listed: Sequence[tuple[str, int, float]],
    kept: Sequence[int],
    expiring: Sequence[int],
    cdf_on: bool,
) -> _ChangeFeed:
    """The change data files (and, with the change data feed on, the removed data files) each commit in the
    log names, split by the oldest kept version (Delta's vacuum removes the change data of expired versions)."""
    feed = _ChangeFeed()
    has_cdc = any(rel.startswith("_change_data/") for rel, _s, _a in listed)
    if not kept or not (has_cdc or cdf_on):
        return feed
    fs, root = uris.filesystem(location, storage_options)
    commits = {int(rel[11:31]): rel for rel, _s, _a in listed if rel.count("/") == 1 and _COMMIT.fullmatch(rel[11:])}
    oldest, gone = min(kept), set(expiring)
    feed.complete = all(v in commits for v in range(oldest, max([*commits, oldest]) + 1))

    def rel_of(path: str) -> str | None:
        return ownership.inside(location, path)  # outside the root: never the table's

    for v, rel in sorted(commits.items()):
        if v < oldest and not has_cdc and v not in gone:
            continue
        try:
            actions = list(_actions(fs, uris.join(root, rel)))
        except Exception as e:  # an unreadable commit: its change data files stay
            log_gc.warning(
                "%s: cannot read %s (%s); no untracked change data file is deleted", location, rel, _short(e)
            )
            feed.complete = False
            continue
        cdc = {r for a in actions if isinstance(a.get("cdc"), dict) and (r := rel_of(a["cdc"]["path"]))}
        (feed.kept if v >= oldest else feed.gone if v in gone else feed.old).update(cdc)
        if cdf_on and not cdc:
            removed = {
                r
                for a in actions
                if isinstance(a.get("remove"), dict) and a["remove"].get("dataChange", True)
                and (r := rel_of(a["remove"]["path"]))
            }  # fmt: skip
            if v >= oldest:
                feed.removed_kept |= removed
            elif v in gone:
                feed.removed_gone |= removed
    feed.old -= feed.kept
    feed.gone -= feed.kept
    return feed


def _z85(text: str) -> bytes:
    out = bytearray()
    for i in range(0, len(text), 5):
        n = 0
        for ch in text[i : i + 5]:
            n = n * 85 + _Z85.index(ch)
        out += n.to_bytes(4, "big")
    return bytes(out)


def deletion_vector_path(descriptor: Mapping[str, Any]) -> str | None:
    """The file of a deletion vector descriptor (``add.deletionVector``): relative to the table for storage
    type ``u`` (``[prefix/]deletion_vector_<uuid>.bin``), the absolute URI (percent-encoded) for ``p``, None
    when inline. ``dal.storage.ownership`` resolves either under the table's root."""
    kind, where = descriptor.get("storageType"), str(descriptor.get("pathOrInlineDv") or "")
    if kind == "p":
        return where  # a URI, percent-encoded
    if kind != "u" or len(where) < 20:
        return None
    raw = _z85(where[-20:])
    hexed = raw.hex()
    name = f"deletion_vector_{hexed[:8]}-{hexed[8:12]}-{hexed[12:16]}-{hexed[16:20]}-{hexed[20:]}.bin"
    return f"{where[:-20]}/{name}" if len(where) > 20 else name


def _actions(fs: pafs.FileSystem, path: str) -> Iterator[dict[str, Any]]:
    with fs.open_input_stream(path) as fh:
        for line in fh.read().decode().splitlines():
            if line.strip():
                yield json.loads(line)


def _deletion_vector_files(
    dataset: str,
    location: str,
    storage_options: Mapping[str, str],
    kept: Sequence[int],
    expiring: Sequence[int],
    listed: Sequence[tuple[str, int, float]],
) -> tuple[set[str], set[str]]:
    """(deletion vector files the kept versions need, every one a replayed or expiring commit adds), both
    relative to the location, from a replay of the log (add/remove actions) from the newest classic
    checkpoint not after the oldest kept version (or from version 0) up to the newest kept one, and the
    commits of the ``expiring`` versions still in the log. delta-rs does not expose deletion vector paths,
    and its vacuum leaves them be.

    Raises:
        DalError: the table has deletion vector files but the log cannot be replayed (nothing is deleted)."""
    if not kept or not any(_DV_FILE.fullmatch(rel.rsplit("/", 1)[-1]) for rel, _s, _a in listed):
        return set(), set()
    names = {rel.split("/", 1)[1] for rel, _s, _a in listed if rel.startswith("_delta_log/") and rel.count("/") == 1}
    oldest, newest = kept[0], kept[-1]
    starts = sorted(
        {int(m.group(1)) for n in names if (m := _CLASSIC_CHECKPOINT.fullmatch(n)) and int(m.group(1)) <= oldest}
    )
    first = starts[-1] if starts else None
    commits = range(first + 1 if first is not None else 0, newest + 1)
    missing = [v for v in commits if f"{v:020d}.json" not in names]
    if missing:
        raise DalError(
            f"{dataset}: cannot tell which deletion vector files kept versions need (no checkpoint at or before "
            f"version {oldest}, and commit {missing[0]} is not in the log); nothing was deleted"
        )
    fs, root = uris.filesystem(location, storage_options)
    log = uris.join(root, "_delta_log")
    state: dict[str, str | None] = {}
    named: set[str] = set()
    needed: set[str] = set()

    def rel_of(dv: Mapping[str, Any] | None) -> str | None:
        path = deletion_vector_path(dv) if dv else None
        return None if path is None else ownership.inside(location, path)  # outside the root: never the table's

    if first is not None:
        import pyarrow.parquet as pq

        parts = sorted(n for n in names if (m := _CLASSIC_CHECKPOINT.fullmatch(n)) and int(m.group(1)) == first)
        for n in parts:
            adds = pq.read_table(uris.join(log, n), filesystem=fs, columns=["add"]).column("add").to_pylist()
            for a in adds:
                if a is not None and (rel := ownership.inside(location, a["path"])) is not None:
                    state[rel] = dv = rel_of(a.get("deletionVector"))
                    if dv:
                        named.add(dv)
        if first in kept:
            needed |= {dv for dv in state.values() if dv}
    for v in commits:
        actions = list(_actions(fs, uris.join(log, f"{v:020d}.json")))
        for kind in ("remove", "add"):  # a commit replacing a file's deletion vector removes the old one first
            for act in actions:
                a = act.get(kind)
                if a is None:
                    continue
                path, dv = ownership.inside(location, a["path"]), rel_of(a.get("deletionVector"))
                if dv:
                    named.add(dv)
                if path is None:
                    continue  # outside the root: reads refuse such a version, gc never counts it as the table's
                if kind == "add":
                    state[path] = dv
                elif path in state and state[path] == dv:
                    del state[path]
        if v in kept:
            needed |= {dv for dv in state.values() if dv}
    for v in expiring:  # a deletion vector file is written for the commit that adds it
        if v not in commits and f"{v:020d}.json" in names:
            named |= {
                dv
                for act in _actions(fs, uris.join(log, f"{v:020d}.json"))
                if (dv := rel_of((act.get("add") or {}).get("deletionVector")))
            }
    return needed, named


def _below(loc: Location, uri: str) -> str | None:
    """``uri`` relative to the location, or None when it lies outside (never deleted: gc lists inside only)."""
    root = os.path.join(loc.uri, "") if loc.local else loc.uri.rstrip("/") + "/"
    if not uri.startswith(root):
        return None
    return uri[len(root) :].replace(os.sep, "/")


def _values(action: Mapping[str, Any], parts: Sequence[str]) -> PartitionValues:
    """An add action's partition values (flattened ``partition.<col>``) as strings."""
    return tuple((c, None if action[f"partition.{c}"] is None else str(action[f"partition.{c}"])) for c in parts)


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


def _short(e: BaseException) -> str:
    """One line: the error's type and message, without the backtrace delta-rs appends (``0: <unknown>``)."""
    text = re.split(r"\n\s*\d+: ", str(e), maxsplit=1)[0]
    return f"{type(e).__name__}: {' '.join(text.split())[:300]}"


def _commit_exists(location: str, version: int, storage_options: Mapping[str, str]) -> bool:
    fs, root = uris.filesystem(location, storage_options)
    try:
        info = fs.get_file_info(uris.join(root, "_delta_log", f"{version:020d}.json"))
    except OSError:
        return False
    return bool(info.type == pafs.FileType.File)


def _logged_reader_features(location: str, storage_options: Mapping[str, str]) -> set[str]:
    """Reader features named by the protocol actions of the table's commit files (best effort: for saying
    why delta-rs refuses a table it cannot load)."""
    fs, root = uris.filesystem(location, storage_options)
    features: set[str] = set()
    try:
        infos = fs.get_file_info(pafs.FileSelector(uris.join(root, "_delta_log")))
        for info in sorted(i.path for i in infos if i.path.endswith(".json"))[-50:]:
            with fs.open_input_stream(info) as fh:
                for line in fh.read().decode(errors="replace").splitlines():
                    if '"protocol"' in line:
                        protocol = json.loads(line).get("protocol") or {}
                        features = set(protocol.get("readerFeatures") or [])
    except (OSError, ValueError, AttributeError):
        return set()
    return features


def _expired(version: int, error: str | None, first: int, committed_at: datetime | None) -> VersionDraft:
    """A version before the oldest one the log can rebuild: recorded, so ``dal versions`` shows it, but
    unreadable (``open`` refuses it with this reason)."""
    why = (
        f"the table's log no longer holds Delta version {version} (expired by log retention or cleanup)"
        if error is None
        else f"delta-rs cannot load Delta version {version} ({error})"
    )
    return VersionDraft(
        operation="expired" if error is None else "unavailable",
        schema=Schema(),
        row_count=0,
        storage_version=version,
        committed_at=committed_at,
        properties={"delta_version": version, UNAVAILABLE_KEY: f"{why}; the oldest readable version is {first}"},
    )


def _deleted_rows(table: Any) -> dict[str, tuple[int, ...]]:
    """Deleted row positions per data file (its path relative to the table, unquoted), from delta-rs."""
    root = unquote(str(table.table_uri)).rstrip("/") + "/"
    dvs = pa.table(table.deletion_vectors())
    out: dict[str, tuple[int, ...]] = {}
    if not dvs.num_rows:
        return out
    masks = dvs.column("selection_vector").combine_chunks()
    offsets = masks.offsets.to_numpy()
    keep = masks.values.to_numpy(zero_copy_only=False).astype(bool)  # True: the row stays
    for i, uri in enumerate(dvs.column("filepath").to_pylist()):
        path = unquote(str(uri))
        gone = np.flatnonzero(~keep[offsets[i] : offsets[i + 1]])
        out[path[len(root) :] if path.startswith(root) else path] = tuple(gone.tolist())
    return out


def physical_schema(logical: pa.Schema) -> pa.Schema:
    """``logical`` with every field (nested ones too) named by its ``delta.columnMapping.physicalName``."""
    return pa.schema([_physical_field(f) for f in logical], metadata=logical.metadata)


def _physical_field(f: pa.Field) -> pa.Field:
    meta = f.metadata or {}
    name = meta.get(COLUMN_MAPPING_KEY.encode(), f.name.encode()).decode()
    return pa.field(name, _physical_type(f.type), f.nullable, f.metadata)


def _physical_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_physical_field(t.field(i)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(_physical_field(t.key_field), _physical_field(t.item_field), t.keys_sorted)
    if pa.types.is_large_list(t):
        return pa.large_list(_physical_field(t.value_field))
    if pa.types.is_list(t):
        return pa.list_(_physical_field(t.value_field))
    return t


def _commit_actions(location: str, version: int, storage_options: Mapping[str, str]) -> list[dict[str, Any]]:
    """The actions of one commit file ([] when it is gone: a version rebuilt from a checkpoint)."""
    fs, root = uris.filesystem(location, storage_options)
    try:
        with fs.open_input_stream(uris.join(root, "_delta_log", f"{version:020d}.json")) as fh:
            text = fh.read().decode()
    except (FileNotFoundError, OSError):
        return []
    out = []
    for line in text.splitlines():
        if line.strip():
            try:
                action = json.loads(line)
            except ValueError as e:
                raise FormatError(f"{location}: Delta commit {version} is not valid JSON ({e})") from e
            if isinstance(action, dict):
                out.append(action)
    return out


def _check_paths(location: str, version: int, actions: Iterable[Mapping[str, Any]]) -> None:
    """Refuse a commit naming a file outside the table's root: the paths of add, remove and cdc actions and of
    deletion vectors (``dal.storage.ownership``: relative paths decoded and joined, absolute ones inside).

    Raises:
        FormatError: naming the table, the version and the entry."""
    table = f"{uris.mask_url(location)} (Delta version {version})"
    for action in actions:
        for kind in ("add", "remove", "cdc"):
            a = action.get(kind)
            if not isinstance(a, dict):
                continue
            article = "an" if kind == "add" else "a"
            if "path" in a:
                ownership.below(location, str(a["path"]), table=table, entry=f"{article} {kind} action's path")
            dv = a.get("deletionVector")
            path = deletion_vector_path(dv) if isinstance(dv, dict) else None
            if path is not None:
                ownership.below(location, path, table=table, entry=f"{article} {kind} action's deletion vector")


def _check_claim(where: str, add: Mapping[str, Any]) -> None:
    """Refuse an add action whose ``numRecords`` no file of its size could hold, without reading the file: the
    check for the counts :func:`_check_counts` does not compare with footers (dal's own commits, files known
    only from a checkpoint), so a hand-edited log claiming 10**12 rows for a small file is not recorded.

    Raises:
        FormatError: naming the table, the version, the file and the claim."""
    claimed, size = add.get("num_records"), add.get("size_bytes")
    if claimed is None or not isinstance(size, int):
        return
    if claimed < 0 or claimed > most_rows(size):
        raise FormatError(
            f"{where}: the log says {add['path']} holds {claimed:,} rows (numRecords) but a Parquet file of "
            f"{size:,} bytes holds at most {most_rows(size):,}; dal will not record a row count its reads would "
            "not return"
        )


def _check_counts(
    location: str, version: int, actions: Iterable[Mapping[str, Any]], storage_options: Mapping[str, str]
) -> None:
    """Refuse a commit another writer made whose ``numRecords`` statistics disagree with the Parquet footers
    of the files it adds (``count()`` and the catalog's row counts come from these statistics, a read from
    the files: a log claiming 10**12 rows for a 10-row file made them differ). One footer per file added,
    read once over a table's history; dal's own commits carry the counts it wrote and are not re-read.

    Raises:
        FormatError: naming the table, the version, the file and both counts."""
    import pyarrow.parquet as pq

    fs = root = None
    for action in actions:
        a = action.get("add")
        if not isinstance(a, dict) or not isinstance(a.get("stats"), str):
            continue
        try:
            claimed = json.loads(a["stats"]).get("numRecords")
        except (ValueError, AttributeError):
            continue
        if claimed is None:
            continue
        if fs is None:
            fs, root = uris.filesystem(location, storage_options)
        rel = ownership.below(location, str(a["path"]), table=location, entry="an add action's path")
        try:
            with fs.open_input_file(uris.join(str(root), rel)) as fh:
                actual = checked_rows(
                    pq.ParquetFile(fh).metadata, f"{uris.mask_url(location)} (Delta version {version}): {rel}"
                )
        except FileNotFoundError:
            continue  # gone (gc, VACUUM): the version is recorded as unavailable elsewhere
        if not isinstance(claimed, int) or isinstance(claimed, bool) or claimed != actual:
            raise FormatError(
                f"{uris.mask_url(location)} (Delta version {version}): the log says {rel} holds "
                f"{str(claimed)[:40]} rows (numRecords) but its Parquet footer says {actual:,}; dal will not "
                "record a row count its reads would not return"
            )


def commit_info(location: str, version: int, storage_options: Mapping[str, str]) -> dict[str, Any] | None:
    """The ``commitInfo`` action of one commit file (None when the file is gone or has none)."""
    fs, root = uris.filesystem(location, storage_options)
    try:
        with fs.open_input_stream(uris.join(root, "_delta_log", f"{version:020d}.json")) as fh:
            text = fh.read().decode()
    except (FileNotFoundError, OSError):
        return None
    for line in text.splitlines():
        if '"commitInfo"' in line:
            info = json.loads(line).get("commitInfo")
            return info if isinstance(info, dict) else None
    return None


def _metadata(info: Mapping[str, Any]) -> dict[str, Any]:
    """A commit's dal keys: delta-rs writes them into ``commitInfo`` itself, delta-spark as the JSON of its
    ``userMetadata`` (an older dal wrote the bare write id there)."""
    out = dict(info)
    user = info.get("userMetadata")
    if isinstance(user, str) and user:
        try:
            parsed = json.loads(user)
        except ValueError:
            parsed = {WRITE_ID_KEY: user}
        if isinstance(parsed, dict):
            out = {**parsed, **out}
        else:
            out.setdefault(WRITE_ID_KEY, user)
    return out


# dal's codec names (pyarrow's) as delta-rs's WriterProperties and Spark's Parquet writer name them: pyarrow's
# "lz4" is Parquet's LZ4_RAW (the Hadoop-framed LZ4 is deprecated and pyarrow cannot read it)
_DELTA_RS_CODECS = {"snappy": "SNAPPY", "gzip": "GZIP", "zstd": "ZSTD", "lz4": "LZ4_RAW", "brotli": "BROTLI",
                    "none": "UNCOMPRESSED"}  # fmt: skip
_SPARK_CODECS = {"lz4": "lz4raw", "none": "uncompressed"}


class DeltaWrite(WriteTransaction):
    """One Delta commit: delta-rs's writer for local data; for Spark, Parquet files staged with Delta
    statistics (``delta.staging``, on the executors) committed as ONE version through delta-rs."""

    format_title = "Delta"
    record_schema = FILE_SCHEMA

    def __init__(self, location: str, opts: WriteOptions) -> None:
        super().__init__(location, opts)
        self.parts: list[str] = list(opts.partition_by or ())

    def check(self, schema: pa.Schema) -> pa.Schema:
        # the partitioning the new version is laid out by: the table's unless a schema overwrite changes it
        self.parts = list(DeltaFormat().check_write(self.location, schema, self.opts))
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
        props = dl.CommitProperties(custom_metadata=dict(opts.commit_metadata))
        actions = [
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
        parts = self.parts or None
        if not DeltaFormat().exists(location, opts.storage_options):
            dl.transaction.create_table_with_add_actions(
                location, dl.Schema.from_arrow(schema), actions, mode="error", partition_by=parts,
                storage_options=storage, commit_properties=props,
            )  # fmt: skip
            return DeltaFormat().find_commit(location, opts)
        table = dl.DeltaTable(location, storage_options=storage)
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
            return DeltaFormat().find_commit(location, opts)
        if opts.schema_mode == "merge":
            # create_write_transaction writes no metaData action for appends, so new columns are added first
            # in their own commit (a schema-change version), then the files are appended against that schema
            current = pa.schema(table.schema().to_arrow())
            extra = [f.with_nullable(True) for f in schema if f.name not in current.names]
            if extra:
                table.alter.add_columns(list(dl.Schema.from_arrow(pa.schema(extra)).fields))
                table = dl.DeltaTable(location, storage_options=storage)
        target = schema if self._replacing else pa.schema(table.schema().to_arrow())
        table.create_write_transaction(
            actions, mode=opts.mode, schema=target, partition_by=parts, commit_properties=props
        )
        return DeltaFormat().find_commit(location, opts)

    def write(self, data: Any) -> int:
        from dal.formats.inputs import to_reader

        reader = to_reader(data)
        check_time_column(self.opts.time_column, reader.schema.names, "a column of the data")
        fmt = DeltaFormat()
        parts = fmt.check_write(self.location, reader.schema, self.opts)
        if self.observer is not None:
            reader = pa.RecordBatchReader.from_batches(reader.schema, self.observed(reader))
        try:
            return fmt.write(self.location, reader, self.opts, parts)
        except DalError as e:
            if self.observer is not None and self.observer.error is not None:
                raise self.observer.error from None  # a row broke a declared rule: delta-rs stopped, no commit
            # an error on the way back (a lost response after the store took the commit) may hide a commit
            landed = None if isinstance(e, SchemaMismatch) else self.landed()
            if landed is None:
                raise
            return landed

    def landed(self) -> int | None:
        try:
            return DeltaFormat().find_commit(self.location, self.opts)
        except (DalError, OSError):
            return None

    def spark_options(self) -> dict[str, str] | None:
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
        return DeltaFormat().find_commit(self.location, self.opts)


__all__ = ["UNAVAILABLE_KEY", "WRITE_ID_KEY", "DeltaFormat", "DeltaWrite", "physical_schema"]
