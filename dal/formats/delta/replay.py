"""Describing a Delta table's versions for the catalog in time proportional to its log, not to its files times
its versions.

delta-rs loads the first version to describe once (its log replay: checkpoint and commits); each later
version is that state with one commit's actions applied (``Tally.apply``): a running tally of the live files,
their rows, bytes and partition totals, so describing a version costs its commit. A commit the tally does not
model (a new schema or protocol, deletion vectors, an add without a size, a commit only a checkpoint holds) is
loaded by delta-rs instead (``Tally.load``), as every version was before. A commit's plain add actions are
read as columns (``Tally.apply_lines``, ``commit_adds``: one Arrow JSON read per commit, not one Python object
per action); one the columns do not plainly take is applied one action at a time (``applies``, ``apply``).

A sync starts from the catalog's record of its last version (``Tally.seed``), so one new commit costs that
commit; one the record cannot take (``Tally._known``), or cleaned from the log, is loaded by delta-rs.

Why one module: the tally's three starts (delta-rs's load, the catalog's record, a commit applied) keep one
state with one set of invariants (live files, totals, what is gone); split, each would reach into the others.

Another writer's ``numRecords`` are compared with the Parquet footers of the files its commits add, up to
``FOOTER_CHECKS`` files per register or sync; the rest are compared when a read plans them
(``dal.read.plan``: a file whose footer disagrees with the version's count is refused), and every claim is
bounded by its file's size without reading it (``log._check_claim``)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.catalog.types import Partition, Schema, VersionDraft
from dal.errors import DalError, FormatError
from dal.formats.arrays import combinations, from_int64s, int64s, strings, valid
from dal.formats.base import CATALOG_KEY, WRITE_ID_KEY, WRITER_CATALOG, Recorded
from dal.formats.catalog_schema import from_arrow
from dal.formats.delta import commit_adds
from dal.formats.delta.log import (
    _arrow_schema,
    _check_claim,
    _check_counts,
    _check_paths,
    _deleted_rows,
    _metadata,
    _short,
    add_actions,
)
from dal.formats.delta.types import COLUMN_MAPPING_KEY
from dal.formats.footers import PAGE_BYTES, PAGE_VALUES, checked_rows
from dal.formats.logical import logical_schema
from dal.storage import ownership, uris
from dal.storage.partitions import PartitionValues, arrow_type

# version property: why a recorded Delta version cannot be read (expired from the log, data files gone)
UNAVAILABLE_KEY = "unavailable"
# footers compared with another writer's numRecords per register / sync (the others: when a read plans them)
FOOTER_CHECKS = 256
# actions a commit the tally applies may hold; any other (metaData, protocol, ...) is loaded by delta-rs
_PLAIN = frozenset({"commitInfo", "add", "remove", "txn", "cdc", "domainMetadata"})


@dataclass
class _File:
    rows: int
    size: int
    values: PartitionValues
    deleted: int = 0


_NO_COLUMNS = (pa.schema([]).empty_table(), pa.nulls(0, pa.string()), pa.nulls(0, pa.int64()), pa.nulls(0, pa.int64()))


@dataclass
class Budget:
    """Footers left to compare with another writer's ``numRecords`` in this register or sync."""

    left: int = field(default_factory=lambda: FOOTER_CHECKS)


@dataclass
class Tally:
    """The live files of one version of the table at ``location`` and their totals."""

    location: str
    storage_options: Mapping[str, str]
    present: set[str] | None  # every file below the table (register: data files gone are marked), else None
    _files: dict[str, _File] | None = field(default_factory=dict)
    _columns: tuple[pa.Table, pa.Array, pa.Array, pa.Array] = field(default_factory=lambda: _NO_COLUMNS)
    # commits' adds applied as columns (``apply_lines``), made into ``_files`` when a later commit needs them
    _pending: list[commit_adds.Adds] = field(default_factory=list)
    _pending_paths: set[str] = field(default_factory=set)
    parts: tuple[str, ...] = ()
    arrow: pa.Schema = field(default_factory=lambda: pa.schema([]))
    rows: int = 0
    size: int = 0
    totals: dict[PartitionValues, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    gone: dict[str, None] = field(default_factory=dict)  # live files not on disk (register), in log order
    footless: dict[str, str] = field(default_factory=dict)  # live files without statistics, gone: why
    dv_missing: str | None = None  # why delta-rs could not read a deletion vector
    loaded: bool = False  # whether a version was loaded (commits apply to it)
    typed: _Typed = field(default_factory=lambda: _Typed(pa.schema([]), ()))
    # seeded from the catalog's newest version (``seed``): its files are not known one by one, only counted
    # (``unlisted``), and its schema is the recorded one until delta-rs loads a version
    seeded: Schema | None = None
    unlisted: int = 0
    _schema: tuple[pa.Schema | None, Schema] = (None, Schema(()))

    # -- delta-rs's state ---------------------------------------------------------------------------------

    def load(self, table: Any, version: int) -> None:
        """Start over from delta-rs's ``table`` (loaded at ``version``): its add actions, checked and summed as
        columns (one object per file only once a later commit applies to them: ``_files``)."""
        self.arrow = _arrow_schema(table)
        self.parts = tuple(table.metadata().partition_columns)
        self.typed = _Typed(self.arrow, self.parts)
        self.gone, self.footless, self.dv_missing, self.loaded = {}, {}, None, False
        self.seeded, self.unlisted = None, 0
        adds = add_actions(table)
        where = f"{uris.mask_url(str(table.table_uri))} (Delta version {version})"
        # checkpointed ones too, whose commits may be gone
        paths = ownership.below_all(table.table_uri, adds.column("path"), table=where, entry="an add action's path")
        _check_claims(where, adds)
        counts = adds.column("num_records").combine_chunks()
        if counts.null_count:  # no statistics: the footer says
            listed = counts.to_pylist()
            names = paths.to_pylist()
            counts = from_int64s([self._count(names[i], version) if n is None else n for i, n in enumerate(listed)])
        deleted = self._deleted(table, version)
        dropped = from_int64s([len(deleted.get(p, ())) for p in paths.to_pylist()] if deleted else np.zeros(len(paths)))
        self.rows = int(pc.sum(counts).as_py() or 0) - int(pc.sum(dropped).as_py() or 0)
        self.size = int(pc.sum(adds.column("size_bytes")).as_py() or 0)
        self.totals = _totals(adds, self.parts, counts)
        if self.present is not None:
            present, raw = self.present, adds.column("path").to_pylist()
            self.gone = dict.fromkeys(p for r, p in zip(raw, paths.to_pylist(), strict=True)
                                      if p not in present and "://" not in r)  # fmt: skip
        self._files, self._pending, self._pending_paths = None, [], set()
        self._columns = (adds, paths, counts, dropped)
        self.loaded = True

    def seed(self, last: Recorded) -> bool:
        """Start from the catalog's record of the version ``last`` (totals, partitions, schema) instead of
        delta-rs's load of it: a sync then costs its new commits, not a replay of the table's log. False (nothing
        changed) when the record cannot be the base: an unavailable version, a partition type dal cannot name."""
        v = last.version
        fields = [v.schema.get(c) for c in v.partition_columns]
        if v.storage_version is None or v.unavailable is not None or None in fields:
            return False
        try:
            types = [pa.field(f.name, arrow_type(f.type)) for f in fields if f is not None]
        except DalError:
            return False
        totals: dict[PartitionValues, list[int]] = defaultdict(lambda: [0, 0, 0])
        for p in last.partitions:
            totals[p.values] = [p.row_count, p.file_count, p.size_bytes]
        self.parts, self.typed, self.totals = (
            tuple(v.partition_columns),
            _Typed(pa.schema(types), v.partition_columns),
            totals,
        )
        self.rows, self.size, self.unlisted, self.seeded = v.row_count, v.size_bytes, v.file_count, v.schema
        self.gone, self.footless, self.dv_missing = {}, {}, None
        self._files, self._columns, self.loaded = {}, _NO_COLUMNS, True
        self._pending, self._pending_paths = [], set()
        return True

    @property
    def files(self) -> dict[str, _File]:
        """The live files by path, made from the loaded columns and the adds applied as columns when first asked
        for."""
        files = self._listed()
        for adds in self._pending:
            made = map(_File, adds.counts, adds.sizes, map(self.typed.texts, adds.values))
            files.update(zip(adds.paths, made, strict=True))
        self._pending, self._pending_paths = [], set()
        return files

    def _listed(self) -> dict[str, _File]:
        """The live files by path but those of ``_pending``."""
        if self._files is None:
            adds, paths, counts, dropped = self._columns
            values = _values_of(adds, self.parts)
            rows, sizes, gone = counts.to_pylist(), adds.column("size_bytes").to_pylist(), dropped.to_pylist()
            self._files = {p: _File(rows[i], sizes[i], values[i], gone[i]) for i, p in enumerate(paths.to_pylist())}
            self._columns = _NO_COLUMNS
        return self._files

    def _deleted(self, table: Any, version: int) -> dict[str, tuple[int, ...]]:
        if "deletionVectors" not in (table.protocol().reader_features or []):
            return {}
        try:
            return _deleted_rows(table)
        except Exception as e:
            if "not found" not in str(e).lower():
                raise
            from dal.formats.delta.gc import missing_deletion_vectors  # an error's path only

            gone = missing_deletion_vectors(self.location, self.storage_options, version)
            # the sorted files, not delta-rs's message: it names whichever its parallel reads met first
            self.dv_missing = (gone[0] + (f" and {len(gone) - 1} more" if len(gone) > 1 else "")) if gone else _short(e)
            return {}

    def _count(self, path: str, version: int) -> int:
        """Rows of a file the log has no statistics for, from its footer (0 and marked when it is gone)."""
        import pyarrow.parquet as pq

        fs, root = uris.filesystem(self.location, self.storage_options)
        try:
            with fs.open_input_file(uris.join(root, path)) as fh:
                return checked_rows(pq.ParquetFile(fh).metadata, f"{uris.mask_url(self.location)}: {path}")
        except FileNotFoundError as e:
            self.footless[path] = _short(e)
            return 0

    # -- one commit -----------------------------------------------------------------------------------

    def applies(self, actions: Sequence[Mapping[str, Any]]) -> list[int | bool] | None:
        """Each add's ``numRecords`` (True: none, counted from its footer) when the tally models every action of
        this commit; None otherwise (delta-rs loads the version)."""
        if not self.loaded or not actions:
            return None
        counts: list[int | bool] = []
        for action in actions:
            if not set(action) <= _PLAIN:
                return None
            for kind in ("add", "remove"):
                a = action.get(kind)
                if a is None:
                    continue
                if not isinstance(a, dict) or not isinstance(a.get("path"), str) or a.get("deletionVector"):
                    return None
                if kind == "add":
                    rows = _counted(a.get("stats"))
                    if type(a.get("size")) is not int or rows is False:
                        return None
                    counts.append(rows)
        if self.seeded is not None and not self._known(actions):
            return None
        return counts

    def _known(self, actions: Sequence[Mapping[str, Any]]) -> bool:
        """Whether a commit applies to a tally seeded from the catalog, whose files it does not know one by one:
        each path named once; every add a data change (a new file: a re-add of a live file, which replaces it
        with other statistics, is ``dataChange: false``); every remove of a file not added since the seed carries
        what the catalog counted for it (``extendedFileMetadata``: size, partition values; its ``numRecords``),
        and its partition's totals hold it. Partition values are keyed by the columns' names (no column
        mapping, whose physical names the catalog does not keep)."""
        seen: set[str] = set()
        gone: dict[PartitionValues, int] = defaultdict(int)
        for action in actions:
            for kind in ("add", "remove"):
                a = action.get(kind)
                if a is None:
                    continue
                raw = a.get("partitionValues")
                if a["path"] in seen or not isinstance(raw, dict) or set(raw) != set(self.parts):
                    return False
                seen.add(a["path"])
                if kind == "add" and a.get("dataChange") is False:
                    return False
                try:
                    path = ownership.below(self.location, a["path"], table=self.location, entry="a path")
                except DalError:
                    return False  # delta-rs loads the commit, and its check says what is wrong
                if kind == "remove" and path not in self.files:
                    rows = _counted(a.get("stats"))
                    if (
                        a.get("extendedFileMetadata") is not True
                        or type(a.get("size")) is not int
                        or type(rows) is not int
                    ):
                        return False
                    gone[self.typed.values(raw)] += 1
        return all(self.totals.get(k, (0, 0, 0))[1] >= n for k, n in gone.items()) if self.parts else True

    def apply(self, version: int, actions: Sequence[Mapping[str, Any]], counts: Sequence[int | bool]) -> None:
        """This commit's removes, then its adds (``counts``: from ``applies``; a file re-added in one commit
        replaces itself)."""
        where = f"{uris.mask_url(self.location)} (Delta version {version})"
        for action in actions:
            a = action.get("remove")
            if a is not None:
                path = ownership.below(self.location, a["path"], table=where, entry="a remove action's path")
                if self.seeded is not None and path not in self.files:  # a file of the seed: as its remove says
                    self._forget(int(_counted(a["stats"])), a["size"], self.typed.values(a["partitionValues"]))
                else:
                    self._remove(path)
        adds = (a for action in actions if (a := action.get("add")) is not None)
        for a, rows in zip(adds, counts, strict=True):
            path = ownership.below(self.location, a["path"], table=where, entry="an add action's path")
            claim = {"path": a["path"], "num_records": None if rows is True else rows, "size_bytes": a["size"]}
            _check_claim(where, claim)
            count = self._count(path, version) if rows is True else int(rows)
            self._remove(path)
            self._add(path, a["path"], _File(count, a["size"], self.typed.values(a.get("partitionValues") or {})))

    def apply_lines(self, version: int, lines: Sequence[bytes], budget: Budget) -> bool:
        """This commit applied from its lines, its add actions read as columns (``commit_adds``): checked
        (paths, claims, another writer's counts against footers) as ``applies`` and ``apply`` check them. False,
        nothing changed, when a line is not plainly one the tally takes that way; the per-action path then
        decides (the same result or the same error). Not for a commit of fewer than ``commit_adds.COLUMNS_FROM``
        adds (as cheap one action at a time). A tally seeded from the catalog (a sync) takes a commit so only when
        ``_known`` would: new files (each path once, no ``dataChange: false``), every partition value named (a
        NULL one, which the columns cannot tell from a missing key, goes one action at a time), no remove (a
        file of the seed is forgotten as its remove says: ``apply``)."""
        if not self.loaded:
            return False
        if len(lines) < commit_adds.COLUMNS_FROM:
            return False
        seeded = self.seeded is not None
        plain, rest = commit_adds.split(lines)
        others = parse_all(rest) if len(plain) >= commit_adds.COLUMNS_FROM else None
        if others is None or any("add" in a for a in others) or (others and self.applies(others) is None):
            return False
        if seeded and any("remove" in a for a in others):
            return False
        where = f"{uris.mask_url(self.location)} (Delta version {version})"
        adds = commit_adds.read_adds(plain, [self.typed.keys[c] for c in self.parts], self.location, where)
        if adds is None:
            return False
        if seeded and (adds.rewrites or adds.null_values or len(set(adds.paths)) != len(adds.paths)):
            return False
        _check_paths(self.location, version, others)  # every other path the commit names, as ``_checked``
        picked = [json.loads(adds.lines[i]) for i in itertools.islice(itertools.compress(
            range(len(adds.lines)), adds.stats), max(budget.left, 0))]  # fmt: skip
        check_footers(self.location, version, [*others, *picked], self.storage_options, budget)
        removes = [r for a in others if (r := a.get("remove")) is not None]
        for r in removes:
            self._remove(ownership.below(self.location, r["path"], table=where, entry="a remove action's path"))
        if adds.uncounted:  # no count in the log: the footer says
            counts = [self._count(p, version) if n is True else n for p, n in zip(adds.paths, adds.counts, strict=True)]
            adds = dataclasses.replace(adds, counts=counts, uncounted=False)
        new = set(adds.paths)
        replaced = not self._pending_paths.isdisjoint(new) or not self._listed().keys().isdisjoint(new)
        if removes or replaced or len(new) != len(adds.paths):  # a file removed or replaced: one at a time
            for path, raw, size, rows, values in zip(adds.paths, adds.raw, adds.sizes, adds.counts, adds.values,
                                                     strict=True):  # fmt: skip
                self._remove(path)
                self._add(path, raw, _File(int(rows), size, self.typed.texts(values)))
            return True
        self._pending.append(
            dataclasses.replace(adds, lines=())
        )  # new files: summed here, one object each only when a later commit needs it
        self._pending_paths |= new
        self.rows += sum(adds.counts)
        self.size += sum(adds.sizes)
        if self.parts:
            by: dict[tuple[str | None, ...], list[int]] = defaultdict(lambda: [0, 0, 0])
            for values, rows, size in zip(adds.values, adds.counts, adds.sizes, strict=True):
                t = by[values]
                t[0], t[1], t[2] = t[0] + rows, t[1] + 1, t[2] + size
            for values, (rows, n, size) in by.items():
                t = self.totals[self.typed.texts(values)]
                t[0], t[1], t[2] = t[0] + rows, t[1] + n, t[2] + size
        if self.present is not None:
            present = self.present
            for raw in adds.raw:
                if (raw not in present or "%" in raw) and "://" not in raw and unquote(raw) not in present:
                    self.gone[unquote(raw)] = None
        return True

    def _add(self, path: str, raw: str, f: _File) -> None:
        self.files[path] = f
        self.rows += f.rows - f.deleted
        self.size += f.size
        if self.parts:
            t = self.totals[f.values]
            t[0], t[1], t[2] = t[0] + f.rows, t[1] + 1, t[2] + f.size
        if self.present is not None and "://" not in raw and unquote(raw) not in self.present:
            self.gone[unquote(raw)] = None

    def _remove(self, path: str) -> None:
        f = self.files.pop(path, None)
        if f is None:
            return
        self.rows -= f.rows - f.deleted
        self.size -= f.size
        if self.parts:
            t = self.totals[f.values]
            t[0], t[1], t[2] = t[0] - f.rows, t[1] - 1, t[2] - f.size
            if not t[1]:
                del self.totals[f.values]
        self.gone.pop(path, None)
        self.footless.pop(path, None)

    def _forget(self, rows: int, size: int, values: PartitionValues) -> None:
        self.rows -= rows
        self.size -= size
        self.unlisted -= 1
        if self.parts:
            t = self.totals[values]
            t[0], t[1], t[2] = t[0] - rows, t[1] - 1, t[2] - size
            if not t[1]:
                del self.totals[values]

    # -- the version's description ------------------------------------------------------------------------

    def missing(self, version: int) -> str | None:
        """Why this version cannot be read (its files are gone), or None."""
        if self.footless:
            why = next(iter(self.footless.values()))
            return f"a data file of Delta version {version} is missing ({why}); was it removed by VACUUM?"
        if self.gone:
            first = next(iter(self.gone))
            return (
                f"{len(self.gone)} data file(s) of Delta version {version} are gone (e.g. {first}): deleted by dal "
                "gc or a VACUUM"
            )
        if self.dv_missing:
            return f"a deletion vector file of Delta version {version} is missing ({self.dv_missing})"
        return None

    def draft(self, version: int, entry: Mapping[str, Any], previous: Schema | None) -> VersionDraft:
        """The version as the catalog records it (``entry``: its commitInfo)."""
        # recorded columns as written (seeded: the recorded schema, which a commit without metaData keeps)
        if self.seeded is None and self._schema[0] is not self.arrow:  # converted once per loaded schema
            self._schema = (self.arrow, from_arrow(logical_schema(self.arrow)))
        schema = self.seeded if self.seeded is not None else self._schema[1]
        missing = self.missing(version)
        ts = entry.get("timestamp")
        props: dict[str, Any] = {"delta_operation": str(entry.get("operation", "")), "delta_version": version}
        if missing:
            props[UNAVAILABLE_KEY] = missing
        writer = _metadata(entry).get(CATALOG_KEY)
        if isinstance(writer, str) and writer:
            props[WRITER_CATALOG] = writer  # which catalog's dal wrote it: sync tells its own from others'
        changed = previous is not None and previous != schema
        return VersionDraft(
            operation="unavailable" if missing else operation(entry, version, changed),
            schema=schema,
            row_count=self.rows,
            file_count=self.unlisted
            + len(self._pending_paths)
            + (len(self._files) if self._files is not None else len(self._columns[1])),
            size_bytes=self.size,
            storage_version=version,
            committed_at=datetime.fromtimestamp(ts / 1000, UTC) if ts is not None else None,
            partition_columns=self.parts,
            partitions=tuple(
                Partition(k, r, f, b) for k, (r, f, b) in sorted(self.totals.items(), key=lambda kv: str(kv[0]))
            ),
            properties=props,
        )


def check_footers(
    location: str, version: int, actions: Sequence[Mapping[str, Any]], options: Mapping[str, str], budget: Budget
) -> None:
    """Another writer's commit: the ``numRecords`` of the files it adds against their footers, while the
    budget lasts (``log._check_counts``); dal's own commits carry the counts it wrote."""
    entry: Mapping[str, Any] = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), {})
    if _metadata(entry).get(WRITE_ID_KEY) or budget.left <= 0:
        return
    picked: list[Mapping[str, Any]] = []
    for a in actions:
        if isinstance(a.get("add"), dict) and isinstance(a["add"].get("stats"), str):
            if len(picked) >= budget.left:
                break
            picked.append(a)
    budget.left -= len(picked)
    _check_counts(location, version, picked, options)


def operation(entry: Mapping[str, Any], version: int, schema_changed: bool) -> str:
    """What a commit did, in the catalog's words."""
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


def _counted(stats: object) -> int | bool:
    """An add's ``numRecords``: the count, True when it has none (counted from the footer), False when the
    statistics are not JSON or the count not a non-negative integer (delta-rs loads that commit)."""
    if stats is None:
        return True
    if not isinstance(stats, str):
        return False
    try:
        parsed = json.loads(stats)
    except ValueError:
        return False
    n = parsed.get("numRecords") if isinstance(parsed, dict) else None
    if n is None:
        return True
    return n if type(n) is int and n >= 0 else False


def _check_claims(where: str, adds: pa.Table) -> None:
    """``log._check_claim`` over every add action at once (the first implausible one raises)."""
    if not adds.num_rows:
        return
    counts, sizes = int64s(adds.column("num_records")), int64s(adds.column("size_bytes"))
    known = valid(adds.column("num_records"))
    bound = (np.maximum(sizes, 0) // PAGE_BYTES).astype(object) * PAGE_VALUES  # footers.most_rows, exact ints
    claimed = np.where(known, counts, 0).astype(object)
    bad = np.flatnonzero(known & ((claimed < 0) | (claimed > bound)))
    if len(bad):
        i = int(bad[0])
        _check_claim(where, {"path": adds.column("path")[i].as_py(), "num_records": int(counts[i]),
                             "size_bytes": int(sizes[i])})  # fmt: skip


def _totals(adds: pa.Table, parts: Sequence[str], counts: pa.Array) -> dict[PartitionValues, list[int]]:
    """Rows, files and bytes per partition value combination (the values as ``_values_of`` prints them), summed
    with numpy over ``arrays.combinations`` (Arrow's ``group_by`` would import ``pyarrow.dataset`` and pandas,
    ~0.3 s CPU of a fresh process's register)."""
    totals: dict[PartitionValues, list[int]] = defaultdict(lambda: [0, 0, 0])
    if not parts or not adds.num_rows:
        return totals
    dicts, keys, of = combinations([adds.column(f"partition.{c}") for c in parts])
    rows, sizes = np.zeros(keys.shape[1], dtype=np.int64), np.zeros(keys.shape[1], dtype=np.int64)
    np.add.at(rows, of, int64s(counts))
    np.add.at(sizes, of, int64s(adds.column("size_bytes")))
    files = np.bincount(of, minlength=keys.shape[1])
    for key, r, f, b in zip(keys.T.tolist(), rows.tolist(), files.tolist(), sizes.tolist(), strict=True):
        total = totals[
            tuple((c, None if d[k] is None else str(d[k])) for c, d, k in zip(parts, dicts, key, strict=True))
        ]
        total[0] += r
        total[1] += f
        total[2] += b
    return totals


def _values_of(adds: pa.Table, parts: Sequence[str]) -> list[PartitionValues]:
    """Each add action's partition values (flattened ``partition.<col>``) as strings."""
    if not parts:
        return [()] * adds.num_rows
    cols = [adds.column(f"partition.{c}").to_pylist() for c in parts]
    return [tuple((c, None if col[i] is None else str(col[i])) for c, col in zip(parts, cols, strict=True))
            for i in range(adds.num_rows)]  # fmt: skip


class _Typed:
    """A commit's ``partitionValues`` (text, keyed by physical name under column mapping) as delta-rs's typed
    values print (``_values_of``), so a version applied from its commit records what delta-rs would."""

    def __init__(self, arrow: pa.Schema, parts: Sequence[str]) -> None:
        self.parts = tuple(parts)
        self.keys: dict[str, str] = {}
        self.types: dict[str, pa.DataType] = {}
        for c in self.parts:
            f = arrow.field(c) if c in arrow.names else None
            meta = (f.metadata or {}) if f is not None else {}
            physical = meta.get(COLUMN_MAPPING_KEY.encode())
            self.keys[c] = physical.decode() if isinstance(physical, bytes) else c
            self.types[c] = f.type if f is not None else pa.string()
        self.seen: dict[tuple[str, str], str | None] = {}
        self.made: dict[tuple[Any, ...], PartitionValues] = {}
        self.made_texts: dict[tuple[str | None, ...], PartitionValues] = {}

    def values(self, raw: Mapping[str, Any]) -> PartitionValues:
        key: tuple[Any, ...] | None = tuple(raw.items())
        try:  # a table's adds name few distinct partitions: each worked out once
            hit = self.made.get(key) if key is not None else None
        except TypeError:  # a value that is not text (delta-rs decides what it means)
            key, hit = None, None
        if hit is None:
            hit = tuple((c, self._one(c, raw.get(self.keys[c], raw.get(c)))) for c in self.parts)
            if key is not None:
                self.made[key] = hit
        return hit

    def texts(self, raw: tuple[str | None, ...]) -> PartitionValues:
        """As ``values``, for the values' texts in the order of the partition columns."""
        hit = self.made_texts.get(raw)
        if hit is None:
            hit = self.made_texts[raw] = tuple((c, self._one(c, t)) for c, t in zip(self.parts, raw, strict=True))
        return hit

    def _one(self, column: str, text: object) -> str | None:
        if text is None:
            return None
        key = (column, str(text))
        if key not in self.seen:
            self.seen[key] = _typed_text(str(text), self.types[column])
        return self.seen[key]


def _typed_text(text: str, typ: pa.DataType) -> str | None:
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return text
    if text == "":
        return None
    if pa.types.is_integer(typ) and text.lstrip("-").isdigit():
        return str(int(text))
    try:
        return str(strings([text]).cast(typ)[0].as_py())
    except (pa.ArrowException, ValueError):
        return text


def commit_lines(location: str, version: int, options: Mapping[str, str]) -> list[bytes] | None:
    """The non-empty lines of one commit file; None when it is gone (a version only a checkpoint holds)."""
    fs, root = uris.filesystem(location, options)
    try:
        with fs.open_input_stream(uris.join(root, "_delta_log", f"{version:020d}.json")) as fh:
            text: bytes = fh.read()
    except OSError:
        return None
    return [line for line in text.splitlines() if line.strip()]


def commit_entry(lines: Sequence[bytes]) -> dict[str, Any]:
    """A commit's ``commitInfo`` ({} when it has none)."""
    for line in lines:
        if b'"commitInfo"' in line:
            try:
                info = json.loads(line).get("commitInfo")
            except (ValueError, AttributeError):
                continue
            if isinstance(info, dict):
                return info
    return {}


def parse_all(lines: Sequence[bytes]) -> list[dict[str, Any]] | None:
    """Every action of a commit; None when one is not a JSON object (delta-rs then decides)."""
    try:
        parsed = [json.loads(line) for line in lines]
    except ValueError:
        return None
    return parsed if all(isinstance(a, dict) for a in parsed) else None


def parse_checked(location: str, version: int, lines: Sequence[bytes], budget: Budget) -> list[dict[str, Any]]:
    """The actions of a commit delta-rs loaded that ``check`` still needs: all but its plain add actions (whose
    paths ``Tally.load`` checked among the version's files), and the first adds the footer budget covers.

    Raises:
        FormatError: a line is not JSON."""
    out: list[dict[str, Any]] = []
    wanted = budget.left
    vectors = commit_adds._DV in b"".join(lines)  # one scan: without any, no add line is looked into
    for line in lines:
        plain = line.startswith(commit_adds._ADD) and not (vectors and commit_adds._DV in line)
        if plain and wanted <= 0:
            continue
        try:
            action = json.loads(line)
        except ValueError as e:
            raise FormatError(f"{location}: Delta commit {version} is not valid JSON ({e})") from e
        if isinstance(action, dict):
            out.append(action)
            wanted -= plain
    return out


def latest_commit(location: str, options: Mapping[str, str]) -> int | None:
    """The newest commit file's version, from one listing of the log (None: none listed)."""
    import pyarrow.fs as pafs

    fs, root = uris.filesystem(location, options)
    try:
        infos = fs.get_file_info(pafs.FileSelector(uris.join(root, "_delta_log")))
    except OSError:
        return None
    names: Iterable[str] = (i.base_name for i in infos)
    found = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(found) if found else None
