"""Delta Lake through delta-rs (``deltalake``): the ``DeltaFormat``: per-version snapshots for the catalog,
pinned reads, and the entry points of writes and gc.

The rest of the package by concern: ``log`` (delta-rs tables, commit files, the checks made on them, deletion
vectors), ``write`` (the checks before a write, local writes, compaction, the ``DeltaWrite`` transaction),
``gc`` (what gc may delete: data files, deletion vectors, change data, log entries), ``types`` (the Arrow
types Delta holds, column mapping), ``stats`` and ``staging`` (the files a Spark write stages)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from dal import progress
from dal.catalog.types import Schema, VersionDraft, VersionInfo
from dal.errors import DalError, FormatError, UnsupportedFeature
from dal.formats.base import (
    CATALOG_KEY,
    DATASET_KEY,
    WRITE_ID_KEY,
    WRITER_CATALOG,
    DataFile,
    Format,
    Retention,
    SparkSource,
    WriteOptions,
    WriteTransaction,
)
from dal.formats.catalog_schema import from_arrow
from dal.formats.delta import gc as delta_gc
from dal.formats.delta import write as delta_write
from dal.formats.delta.log import (
    SUPPORTED_READER_FEATURES,
    _arrow_schema,
    _check_claim,
    _check_counts,
    _check_location,
    _check_paths,
    _commit_actions,
    _commit_exists,
    _deleted_rows,
    _dl,
    _metadata,
    _opts,
    _short,
    commit_info,
    open_table,
    table_exists,
)
from dal.formats.delta.stats import prunable_bounds
from dal.formats.delta.types import COLUMN_MAPPING_KEY, physical_schema
from dal.formats.delta.write import DeltaWrite
from dal.formats.described import Described
from dal.formats.footers import checked_rows
from dal.formats.index import FileIndex
from dal.formats.logical import logical_schema
from dal.storage import ownership, uris
from dal.storage.location import Location
from dal.storage.partitions import PartitionValues, partition_totals

# version property: why a recorded Delta version cannot be read (expired from the log, data files gone)
UNAVAILABLE_KEY = "unavailable"
# delta-rs tables of pinned versions, by the VersionInfo object that pins them (kept alive beside: the id is
# checked against the very object, so it never names another version)
_PINNED: OrderedDict[tuple[int, str], tuple[VersionInfo, dict[str, str], Any]] = OrderedDict()
_PINNED_LOCK = threading.Lock()


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
    table_roots = ("_delta_log",)
    spark_source = SparkSource("delta", "io.delta.tables.DeltaTable", "versionAsOf")

    def begin(self, location: str, opts: WriteOptions, latest: VersionInfo | None) -> WriteTransaction:
        _check_location(location)
        return DeltaWrite(location, opts)

    def written_for(self, location: str, storage_options: Mapping[str, str]) -> str:
        return str(_metadata(commit_info(location, 0, storage_options) or {}).get(DATASET_KEY, ""))

    def described(self, location: str, storage_options: Mapping[str, str]) -> Described:
        """What dal's writes recorded in the commits the log still holds (``dal.formats.described``)."""
        table = self._table(location, storage_options)
        columns = from_arrow(logical_schema(_arrow_schema(table))).names
        commits = (
            (v, _metadata(info))
            for v in range(table.version() + 1)
            if (info := commit_info(location, v, storage_options)) is not None
        )
        return Described.of(commits, columns)

    def exists(self, location: str, storage_options: Mapping[str, str]) -> bool:
        return table_exists(location, storage_options)

    def _table(self, location: str, storage_options: Mapping[str, str], version: int | None = None) -> Any:
        return open_table(location, storage_options, version)

    def compact(self, location: str, latest: VersionInfo, opts: WriteOptions, target_file_size: int) -> int | None:
        """delta-rs's ``optimize.compact`` as one commit (``dal.formats.delta.write.compact``)."""
        return delta_write.compact(location, latest, opts, target_file_size)

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
        writer = _metadata(entry).get(CATALOG_KEY)
        if isinstance(writer, str) and writer:
            props[WRITER_CATALOG] = writer  # which catalog's dal wrote it: sync tells its own from others'
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
        rule): ``dal.formats.delta.gc.garbage``. ``prepare_gc`` writes a checkpoint at the oldest kept version
        first when the log needs one, so every kept version stays loadable without the entries that go."""
        return delta_gc.garbage(self, dataset, location, storage_options, expiring, kept, retention)

    def prepare_gc(
        self, location: str, storage_options: Mapping[str, str], kept: Sequence[VersionInfo], doomed: Sequence[str]
    ) -> None:
        """Before gc deletes log entries: a checkpoint at the oldest kept version unless one newer than every
        doomed entry (and not newer than that version) exists, written by delta-rs, so kept versions load."""
        delta_gc.prepare_gc(location, storage_options, kept, doomed)

    def tidy(self, location: str, storage_options: Mapping[str, str], deleted: Sequence[str]) -> None:
        """Local disk: the partition directories left empty (never the log's)."""
        ownership.remove_empty_dirs(Location.of(location, storage_options), lambda rel: not rel or "_delta_log" in rel)


def _values(action: Mapping[str, Any], parts: Sequence[str]) -> PartitionValues:
    """An add action's partition values (flattened ``partition.<col>``) as strings."""
    return tuple((c, None if action[f"partition.{c}"] is None else str(action[f"partition.{c}"])) for c in parts)


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


__all__ = ["UNAVAILABLE_KEY", "WRITE_ID_KEY", "DeltaFormat", "DeltaWrite", "physical_schema"]
