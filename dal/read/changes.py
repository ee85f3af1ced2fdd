"""Reading what changed between two versions: a format's ``ChangePlan`` (``dal.formats.changes``) -> Arrow rows.

Each unit of a plan is read on its own (``read_unit``: picklable plan and unit in, one Arrow table out), so a
reading engine can treat units as tasks: a ``FileChanges`` is one file read like any data file (deletion
vectors and column mapping applied: ``dal.formats.fragments.read_exact``) plus three constant columns; a
``DiffUnit`` reads both sides and keeps the multiset difference of full rows (``multiset_difference``).

A reading engine that plans its own tasks can read a ``FileChanges`` as it reads any data file: a row group
at a time through ``read_exact`` (live rows: every position but ``deleted``, or only those in ``only``), with
the plan's ``schema``/``physical`` (plus a ``_change_type`` string field for a change-data file, whose rows
carry it), then add the three columns as constants of the unit (``_change_type`` unless the file carries it,
``_commit_version``, ``_commit_timestamp``); selection and filters apply after, as to any chunk. A
``DiffUnit`` is one task whose rows are known only after both sides are read (``read_unit``); its row count
is not known from footers.

``read_changes`` is the whole answer for a dataset: the rows versions ``(since, until]`` inserted and deleted,
each with ``_change_type``, ``_commit_version`` (the catalog's version number) and ``_commit_timestamp``,
projected onto ``until``'s schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dal.catalog.types import DatasetInfo, VersionInfo
from dal.errors import ChangesUnavailable, DalError, check_int
from dal.formats.changes import (
    CHANGE_TYPE,
    CHANGE_TYPES,
    DELETE,
    INSERT,
    ChangeFile,
    ChangePlan,
    FileChanges,
    Unit,
)
from dal.formats.fragments import read_exact
from dal.formats.registry import get_format
from dal.storage import uris


def plan_changes(
    info: DatasetInfo,
    versions: Sequence[VersionInfo],
    since: int | None,
    until: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> ChangePlan:
    """The plan of what versions ``(since, until]`` of ``info`` changed. ``versions``: the dataset's recorded
    versions (``Catalog.versions``, any order); ``since`` None: from its first version; ``until`` None: its
    newest. ``since == until``: an empty plan.

    Raises:
        DalError: ``since`` is after ``until``, or either is not a recorded version.
        ChangesUnavailable: the history cannot say exactly what changed (``Format.changes``).
    """
    by_number = {v.number: v for v in versions}
    if not by_number:
        raise DalError(f"{info.name} has no versions")
    until = max(by_number) if until is None else check_int(until, "until", minimum=0)
    if since is not None:
        since = check_int(since, "since", minimum=0)
    for what, number in (("until", until), ("since", since)):
        if number is not None and number not in by_number:
            raise DalError(
                f"{info.name} has no version {number} ({what}): its versions are {min(by_number)}..{max(by_number)}"
            )
    if since is not None and since > until:
        raise DalError(f"since ({since}) must not be after the version read ({until})")
    options = dict(storage_options or {})
    fmt = get_format(info.format)
    if since == until:
        pinned = by_number[until]
        if pinned.unavailable:
            raise ChangesUnavailable(f"{info.name} version {until} cannot be read: {pinned.unavailable}")
        schema = fmt.arrow_schema(info.location, pinned, options)
        return ChangePlan(info.name, info.location, since, until, schema, fmt.physical_schema(schema), ())
    between = [by_number[n] for n in sorted(by_number) if (since is None or n > since) and n <= until]
    return fmt.changes(info.location, options, between, None if since is None else by_number[since])


def read_changes(
    info: DatasetInfo,
    versions: Sequence[VersionInfo],
    since: int | None,
    until: int | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> pa.Table:
    """Every row versions ``(since, until]`` of ``info`` inserted or deleted (``plan_changes``), in commit order,
    with ``_change_type``, ``_commit_version`` and ``_commit_timestamp``.

    Raises:
        ChangesUnavailable: the history cannot say exactly what changed, or a file it needs is gone.
    """
    plan = plan_changes(info, versions, since, until, storage_options)
    tables = list(iter_changes(plan, storage_options or {}))
    return pa.concat_tables(tables) if tables else plan.output_schema.empty_table()


def iter_changes(plan: ChangePlan, storage_options: Mapping[str, str]) -> Iterator[pa.Table]:
    """The rows of each unit of ``plan`` in order (a unit that changed nothing: no table)."""
    for unit in plan.units:
        table = read_unit(plan, unit, storage_options)
        if table.num_rows:
            yield table


def read_unit(
    plan: ChangePlan, unit: Unit, storage_options: Mapping[str, str], row_group: int | None = None
) -> pa.Table:
    """The changed rows of one unit of ``plan`` (of a ``FileChanges`` unit's row group ``row_group`` when given),
    with the plan's ``output_schema``.

    Raises:
        ChangesUnavailable: a file is gone (reclaimed by gc or a VACUUM), or its rows cannot be projected onto
            the plan's schema.
    """
    if isinstance(unit, FileChanges):
        carries = unit.change_type is None  # a change-data file: its rows say their change type
        table = _read_file(plan, unit.file, storage_options, with_change_type=carries, row_group=row_group)
        types = table.column(CHANGE_TYPE) if carries else pa.repeat(pa.scalar(unit.change_type), table.num_rows)
        if carries:
            table = table.drop_columns([CHANGE_TYPE])
            unknown = set(pc.unique(types).to_pylist()) - set(CHANGE_TYPES)
            if unknown:
                raise ChangesUnavailable(
                    f"{plan.dataset} version {unit.version}: the change data file {unit.file.path} holds change "
                    f"types {sorted(map(str, unknown))}, not {', '.join(CHANGE_TYPES)}"
                )
        return _labelled(plan, table, types, unit.version, unit)
    removed = _read_files(plan, unit.removed, storage_options)
    added = _read_files(plan, unit.added, storage_options)
    deletes, inserts = multiset_difference(removed, added)
    types = pa.concat_arrays(
        [pa.repeat(pa.scalar(DELETE), deletes.num_rows), pa.repeat(pa.scalar(INSERT), inserts.num_rows)]
    )
    return _labelled(plan, pa.concat_tables([deletes, inserts]), types, unit.version, unit)


def _labelled(
    plan: ChangePlan, table: pa.Table, types: pa.Array | pa.ChunkedArray, version: int, unit: Unit
) -> pa.Table:
    n = table.num_rows
    columns = [*table.columns, types, pa.repeat(pa.scalar(version, pa.int64()), n),
               pa.repeat(pa.scalar(unit.timestamp, pa.timestamp("us", tz="UTC")), n)]  # fmt: skip
    return pa.Table.from_arrays(columns, schema=plan.output_schema)


def _read_files(plan: ChangePlan, files: Sequence[ChangeFile], storage_options: Mapping[str, str]) -> pa.Table:
    tables = [_read_file(plan, f, storage_options) for f in files]
    return pa.concat_tables(tables) if tables else plan.schema.empty_table()


def _read_file(
    plan: ChangePlan,
    file: ChangeFile,
    storage_options: Mapping[str, str],
    *,
    with_change_type: bool = False,
    row_group: int | None = None,
) -> pa.Table:
    """The live rows of ``file`` (or only its ``only`` positions) projected onto the plan's schema (plus the
    file's own ``_change_type`` column, for a change-data file); of row group ``row_group`` only when given."""
    schema, physical = plan.schema, plan.physical
    if with_change_type:
        extra = pa.field(CHANGE_TYPE, pa.string())
        schema = schema.append(extra)
        physical = physical.append(extra) if physical is not None else None
    fs, path = _path(plan, file, storage_options)
    try:
        tables = [
            read_exact(path, fs, rg, schema, physical, file.partition_values, gone)
            for rg, gone, _live in _row_groups(plan, file, fs, path)
            if row_group is None or rg == row_group
        ]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise ChangesUnavailable(
            f"{plan.dataset}: the rows of {file.path} cannot be projected onto version {plan.until}'s schema ({e})"
        ) from e
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _path(plan: ChangePlan, file: ChangeFile, storage_options: Mapping[str, str]) -> tuple[Any, str]:
    fs, root = uris.filesystem(plan.location, storage_options)
    return fs, uris.join(root, *[p for p in file.path.split("/") if p])


def _row_groups(plan: ChangePlan, file: ChangeFile, fs: Any, path: str) -> list[tuple[int, tuple[int, ...], int]]:
    """Each row group of ``file`` holding live rows: its index, the positions in it that are not live, and how
    many are (from the footer: nothing read).

    Raises:
        ChangesUnavailable: the file is gone.
    """
    try:
        with fs.open_input_file(path) as fh:
            md = pq.ParquetFile(fh).metadata
    except FileNotFoundError as e:
        raise ChangesUnavailable(
            f"{plan.dataset}: the file {file.path} that the changes of versions after "
            f"{plan.since if plan.since is not None else 'the first'} need is gone (reclaimed by dal gc or a VACUUM)"
        ) from e
    out, start = [], 0
    deleted = np.asarray(file.deleted, dtype=np.int64)
    only = None if file.only is None else np.asarray(file.only, dtype=np.int64)
    for rg in range(md.num_row_groups):
        n = md.row_group(rg).num_rows
        if only is not None:
            keep = only[(only >= start) & (only < start + n)] - start
            if len(keep):
                mask = np.ones(n, dtype=bool)
                mask[keep] = False
                out.append((rg, tuple(np.flatnonzero(mask).tolist()), len(keep)))
        else:
            gone = tuple((deleted[(deleted >= start) & (deleted < start + n)] - start).tolist())
            out.append((rg, gone, n - len(gone)))
        start += n
    return out


WHOLE = -1  # a piece that is a whole unit (a DiffUnit: its rows are known only once both sides are read)


def pieces(plan: ChangePlan, storage_options: Mapping[str, str]) -> list[tuple[int, int, int]]:
    """The plan cut into pieces read one at a time: ``(unit, row group, rows)`` — a ``FileChanges`` unit by row
    group, its live rows counted from the footer (a change-data file: every row of it), a ``DiffUnit`` whole
    (``WHOLE``, rows -1: unknown until read). Reading one piece holds one row group (or one commit's rewrite)
    in memory, not the change set."""
    out: list[tuple[int, int, int]] = []
    for i, unit in enumerate(plan.units):
        if isinstance(unit, FileChanges):
            fs, path = _path(plan, unit.file, storage_options)
            out += [(i, rg, live) for rg, _gone, live in _row_groups(plan, unit.file, fs, path) if live]
        else:
            out.append((i, WHOLE, -1))
    return out


def read_piece(plan: ChangePlan, unit: int, row_group: int, storage_options: Mapping[str, str]) -> pa.Table:
    """The changed rows of one piece (``pieces``), with the plan's ``output_schema``.

    Raises:
        ChangesUnavailable: as ``read_unit``.
    """
    return read_unit(plan, plan.units[unit], storage_options, None if row_group == WHOLE else row_group)


def multiset_difference(removed: pa.Table, added: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(rows of ``removed`` that ``added`` lacks, rows of ``added`` that ``removed`` lacks), as multisets of full
    rows (a row held three times and kept twice is one delete), each in its side's order. Rows compare by value:
    floats by their bits (NaN equals NaN), nulls equal nulls, structs field by field, lists of numbers by their
    items' bytes, other nested values by their Python form."""
    if not removed.num_rows or not added.num_rows:
        return removed, added
    both = pa.concat_tables([removed, added.cast(removed.schema)])
    keys = [k for c in both.columns for k in _keys(c.combine_chunks())]
    n, nr = both.num_rows, removed.num_rows
    side = np.concatenate([np.zeros(nr, dtype=np.int8), np.ones(n - nr, dtype=np.int8)])
    if not keys:  # no comparable column (none at all): every row is the same row
        order = np.argsort(side, kind="stable")
        same = np.ones(n - 1, dtype=bool)
    else:
        names = [f"k{i}" for i in range(len(keys))]
        table = pa.Table.from_arrays([*keys, pa.array(side)], names=[*names, "side"])
        order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in [*names, "side"]]).to_numpy()
        same = np.ones(n - 1, dtype=bool)
        for k in keys:
            s = k.take(pa.array(order))
            a, b = s.slice(1), s.slice(0, n - 1)
            equal = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
            nulls = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
            same &= equal | nulls
    first = np.concatenate([[True], ~same])
    group = np.cumsum(first) - 1
    sides = side[order]
    in_removed = np.bincount(group, weights=sides == 0).astype(np.int64)[group]
    in_added = np.bincount(group, weights=sides == 1).astype(np.int64)[group]
    position = np.arange(n) - np.flatnonzero(first)[group]  # removed rows come first in each group
    deleted = np.sort(order[(sides == 0) & (position >= in_added)])
    inserted = np.sort(order[(sides == 1) & (position - in_removed >= in_removed)]) - nr
    return removed.take(pa.array(deleted, pa.int64())), added.take(pa.array(inserted, pa.int64()))


def _keys(values: pa.Array) -> list[pa.Array]:
    """Sortable, comparable stand-ins for a column: equal rows of the column have equal rows of every key. A
    struct is its validity and its fields' keys; a column of no type (equal in every row) has none."""
    t = values.type
    if pa.types.is_null(t):
        return []
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    if pa.types.is_struct(t):
        valid = pc.is_valid(values).cast(pa.int8())
        return [valid] + [k for field in values.flatten() for k in _keys(field)]  # fields null where the struct is
    if pa.types.is_floating(t):
        width = np.int32 if t.bit_width <= 32 else np.int64
        values = values.cast(pa.float32()) if t.bit_width < 32 else values
        bits = pc.fill_null(values, 0).to_numpy(zero_copy_only=False).view(width)
        return [pa.array(bits, mask=pc.is_null(values).to_numpy(zero_copy_only=False))]
    packed = _packed_list(values)
    if packed is not None:
        return [packed]
    nested = pa.types.is_nested(t) or isinstance(t, pa.BaseExtensionType) or pa.types.is_union(t)
    if nested:
        return [pa.array([None if v is None else repr(v) for v in values.to_pylist()], pa.string())]
    return [values]


def _packed_list(values: pa.Array) -> pa.Array | None:
    """A list column of fixed-width numbers (embeddings, vectors) without null items as the bytes of each row's
    items (equal bytes: equal lists, floats by their bits; nulls stay null), without a Python object per row;
    None for any other column."""
    t = values.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        return None
    item = t.value_type
    if not (pa.types.is_integer(item) or pa.types.is_floating(item) or pa.types.is_temporal(item)):
        return None
    items = values.flatten()  # the items of the non-null lists, in order
    if items.null_count or item.bit_width % 8:
        return None
    raw = items.to_numpy(zero_copy_only=False).view(np.uint8)
    lengths = pc.fill_null(pc.list_value_length(values), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths * (item.bit_width // 8))]).astype(np.int64)
    valid = pc.is_valid(values)
    buffers = [valid.buffers()[1] if values.null_count else None, pa.py_buffer(offsets), pa.py_buffer(raw.tobytes())]
    return pa.Array.from_buffers(pa.large_binary(), len(values), buffers, null_count=values.null_count)


__all__ = ["iter_changes", "multiset_difference", "plan_changes", "read_changes", "read_unit"]
