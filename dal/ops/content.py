"""Read-only looks at a version for the CLI and the UI: ``head`` (the first rows, from the files that hold them)
and ``stats`` (per-column statistics from the log, else the file footers), and ``verify_deleted`` (does any file under the
location still hold rows a predicate matches). ``dal.lifecycle`` re-exports them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from dal.api import CatalogLike
from dal.catalog import VersionInfo, VersionRef
from dal.catalog.types import Schema
from dal.errors import FilterError, FormatError, translating
from dal.formats.base import DataFile
from dal.formats.index import FileIndex
from dal.formats.registry import get_format
from dal.ops.first import first_rows
from dal.storage import uris
from dal.tensors.schema import decode_table

if TYPE_CHECKING:
    pass


from dataclasses import field
from typing import TYPE_CHECKING

from dal import validate
from dal.api import get_catalog
from dal.storage import ownership
from dal.storage.location import Location

HEAD_MAX_ROWS = 10_000


@translating("reading the first rows of {name}")
def head(
    name: str,
    version: VersionRef = None,
    *,
    n: int = 10,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> tuple[VersionInfo, list[dict[str, Any]]]:
    """The first ``n`` rows (of ``where``'s matches) of a version as dicts; tensor fields are summarised as
    ``dtype[shape]`` strings, binary values by their length.

    Args:
        name: The dataset's catalog name.
        version: None (latest), a number, a tag, or a time (as ``dal.open``).
        n: How many rows, at most ``HEAD_MAX_ROWS``.
        columns: Only these columns (default: all).
        where: A SQL filter (``"label = 1"``): the first ``n`` matching rows.
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        VersionNotFound: no such version.
        FilterError: ``n`` out of range, or ``where`` is not a filter on the version's columns."""
    from dal import api

    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= HEAD_MAX_ROWS:
        raise FilterError(f"-n must be an integer in [0, {HEAD_MAX_ROWS}], not {n!r}")
    ds = api.open(name, version, storage_options=storage_options, catalog=catalog)
    table = first_rows(ds, n, columns, where)  # the files that hold them, not the whole version's footers
    if table is None:
        return ds.version, []
    return ds.version, display_rows(table, ds.schema)


def display_rows(table: pa.Table, schema: Schema) -> list[dict[str, Any]]:
    """Rows as dicts for a person: tensors as ``dtype[shape]``, binary values by their length, long lists by
    their length."""
    tensors = [c for c in table.column_names if (f := schema.get(c)) is not None and f.codec not in (None, "scalar")]
    rows = table.drop_columns(tensors).to_pylist() if tensors else table.to_pylist()
    if tensors:
        decoded = decode_table(table.select(tensors), schema)
        for c in tensors:
            for i, value in enumerate(decoded[c]):
                rows[i][c] = _summary(value)
        rows = [{c: r[c] for c in table.column_names} for r in rows]
    return [{k: _cell(v) for k, v in r.items()} for r in rows]


def _summary(value: Any) -> str:
    if value is None:
        return "null"
    dtype = getattr(value, "dtype", None)
    shape = getattr(value, "shape", None)
    if dtype is not None and shape is not None:
        return f"{dtype}[{', '.join(str(d) for d in shape)}]"
    return type(value).__name__


def _cell(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, list) and len(value) > 8:
        return f"list[{len(value)}]"
    return value


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column from Parquet footers (None: not known without reading the data)."""

    name: str
    type: str
    nulls: int | None
    min: Any
    max: Any
    distinct: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"column": self.name, "type": self.type, "nulls": self.nulls, "min": _jsonable(self.min),
                "max": _jsonable(self.max), "distinct": self.distinct}  # fmt: skip


@dataclass(frozen=True)
class Stats:
    """Per-column statistics of one version, from its files' footers and partition values (no data read)."""

    dataset: str
    version: int
    rows: int
    files: int
    size_bytes: int
    columns: tuple[ColumnStats, ...]
    exact: bool = True  # False when deletion vectors make footer counts upper bounds

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "rows": self.rows,
            "files": self.files,
            "size_bytes": self.size_bytes,
            "exact": self.exact,
            "columns": [c.to_dict() for c in self.columns],
        }


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


class _Column:
    """What the footers and partition values of a version's files tell of one column so far."""

    def __init__(self) -> None:
        self.nulls = 0
        self.min: Any = None
        self.max: Any = None
        self.known = True  # False: a file whose nulls are not known without reading it

    def see_nulls(self, count: int | None) -> None:
        if count is None:
            self.known = False
        else:
            self.nulls += count

    def see_range(self, lo: Any, hi: Any) -> None:
        self.min = lo if self.min is None else min(self.min, lo)
        self.max = hi if self.max is None else max(self.max, hi)

    def summary(self, fld: pa.Field, schema: Schema, distinct: int | None) -> ColumnStats:
        """The column's statistics (min and max are not shown for binary and tensor columns)."""
        tensor = (cf := schema.get(fld.name)) is not None and cf.codec not in (None, "scalar")
        binary = pa.types.is_binary(fld.type) or pa.types.is_large_binary(fld.type) or tensor
        kind = cf.describe() if tensor and cf is not None else str(fld.type)
        return ColumnStats(fld.name, kind, self.nulls if self.known else None, None if binary else self.min,
                           None if binary else self.max, distinct)  # fmt: skip


@translating("computing statistics of {name}")
def stats(
    name: str,
    version: VersionRef = None,
    *,
    storage_options: Mapping[str, str] | None = None,
    catalog: CatalogLike = None,
) -> Stats:
    """Rows, nulls, min and max per column: from the table format's log where it states them exactly for a
    file (Delta's per-file statistics of integer, floating, date and short string columns), else from the Parquet
    footers (one read per file that needs it; a version whose log covers every column opens no data file); for
    partition columns from the partition values, with an exact distinct count. A list, struct or map column's nulls
    are exact when one of its leaves has none (0), else unknown (None); it has no min or max.

    Args:
        name: The dataset's catalog name.
        version: None (latest), a number, a tag, or a time (as ``dal.open``).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Raises:
        DatasetNotFound: no dataset of that name.
        VersionNotFound: no such version.
        FormatError: a data file's Parquet footer cannot be read."""
    from dal import api

    ds = api.open(name, version, storage_options=storage_options, catalog=catalog)
    schema = ds.arrow_schema()
    files = ds.files()
    physical = get_format(ds.info.format).physical_schema(schema)
    to_physical = {f.name: p.name for f, p in zip(schema, physical, strict=True)} if physical is not None else {}
    parts = {c for f in files for c, _v in f.partition_values}
    acc = {f.name: _Column() for f in schema}
    logged = _logged(ds.file_index(), schema, parts, acc)
    data = [fld.name for fld in schema if fld.name not in parts]
    for i, f in enumerate(files):
        for c, v in f.partition_values:
            if c in acc:
                if v is None:
                    acc[c].see_nulls(f.row_count)
                else:
                    acc[c].see_range(v, v)
        wanted = {c for c in data if c not in logged or not logged[c][i]}
        if wanted:  # the columns the log does not state exactly for this file: from its footer
            _footer_stats(f, schema, wanted, to_physical, acc, storage_options or {})
    distinct = {c: len({v for f in files for k, v in f.partition_values if k == c and v is not None}) for c in parts}
    columns = tuple(acc[fld.name].summary(fld, ds.schema, distinct.get(fld.name)) for fld in schema)
    pinned = ds.version
    return Stats(name, pinned.number, pinned.row_count, len(files), sum(f.size_bytes for f in files), columns,
                 exact=not any(f.deleted_rows for f in files))  # fmt: skip


def _logged(index: FileIndex | None, schema: pa.Schema, parts: set[str], acc: dict[str, _Column]) -> dict[str, Any]:
    """The data columns the log states exactly for some files (``FileIndex.exact``), their statistics seen into
    ``acc``; by column, which files (one bool per file, in ``files()`` order)."""
    covered: dict[str, Any] = {}
    if index is None:
        return covered
    for fld in schema:
        logged = None if fld.name in parts else index.exact(fld.name, schema)
        if logged is None:
            continue
        acc[fld.name].see_nulls(logged.nulls)
        if logged.lo is not None and logged.hi is not None:
            acc[fld.name].see_range(logged.lo, logged.hi)
        covered[fld.name] = logged.covered
    return covered


def _footer_stats(
    f: DataFile,
    schema: pa.Schema,
    wanted: set[str],
    to_physical: Mapping[str, str],
    acc: dict[str, _Column],
    storage_options: Mapping[str, str],
) -> None:
    fs, path = uris.filesystem(f.uri, storage_options)
    try:
        with fs.open_input_file(path) as handle:
            footer = pq.ParquetFile(handle)
            meta, stored = footer.metadata, footer.schema_arrow
    except Exception as e:
        raise FormatError(f"cannot read the Parquet footer of {f.uri}: {e}") from e
    leaves = _leaves(stored, meta.num_columns)
    for fld in schema:
        if fld.name not in wanted:
            continue
        a = acc[fld.name]
        name = to_physical.get(fld.name, fld.name)
        if leaves is None:  # a footer whose columns dal cannot attribute: nothing is known of this file
            a.see_nulls(None)
            continue
        if name not in leaves:  # not in this file (added later): all null here
            a.see_nulls(f.row_count)
            continue
        for g in range(meta.num_row_groups):
            found = [meta.row_group(g).column(c).statistics for c in leaves[name]]
            counts = [st.null_count if st is not None and st.has_null_count else None for st in found]
            if _is_nested(stored.field(name).type):
                # a leaf's nulls count null and empty lists, null elements and fields too, never fewer than the
                # null rows (each has one null leaf entry): exact only when none; else unknown without a read
                a.see_nulls(0 if 0 in counts else None)
                continue  # an element's or field's min and max are not the column's
            a.see_nulls(counts[0])
            st = found[0]
            if st is not None and st.has_min_max:
                try:
                    a.see_range(st.min, st.max)
                except TypeError:
                    pass  # incomparable logical values (mixed types): leave as is


_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list, pa.types.is_list_view,
          pa.types.is_large_list_view)  # fmt: skip


def _is_nested(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is stored below a group (a list, struct or map), not as one leaf."""
    t = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
    return pa.types.is_struct(t) or pa.types.is_map(t) or any(is_(t) for is_ in _LISTS)


def _leaf_count(t: pa.DataType) -> int:
    """How many Parquet leaf columns store a column of type ``t``."""
    t = t.storage_type if isinstance(t, pa.BaseExtensionType) else t
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_dictionary(t) or any(is_(t) for is_ in _LISTS):
        return _leaf_count(t.value_type)
    return 1


def _leaves(stored: pa.Schema, columns: int) -> dict[str, range] | None:
    """The leaf columns of each top-level column of a Parquet file (depth first, in schema order), by name:
    a leaf's path (``v.list.element``, ``s.a``) is not the column's name, and a name may hold a dot. None
    when they do not add up to the file's ``columns`` leaves."""
    out, start = {}, 0
    for fld in stored:
        n = _leaf_count(fld.type)
        out[fld.name] = range(start, start + n)
        start += n
    return out if start == columns else None


# -- gc -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeletedCheck:
    """What ``verify_deleted`` found: how many data files it read, each file (path below the location) that holds
    rows the predicate matches, with their count, and each file it could not judge (a partition column the
    predicate names is neither in the file nor in its path: Delta column mapping may name partition folders at
    random). The rows are gone only when both lists are empty."""

    dataset: str
    where: str
    files_scanned: int
    files_with_rows: list[tuple[str, int]]
    files_unchecked: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.files_with_rows and not self.files_unchecked

    def to_dict(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "where": self.where, "files_scanned": self.files_scanned,
                "files_with_rows": [{"path": p, "rows": n} for p, n in self.files_with_rows],
                "files_unchecked": list(self.files_unchecked), "clean": self.clean}  # fmt: skip


@translating("checking deleted rows of {name}")
def verify_deleted(
    name: str, *, where: str, storage_options: Mapping[str, str] | None = None, catalog: CatalogLike = None
) -> DeletedCheck:
    """Read every Parquet data file under the dataset's location — whatever version (or none) references it,
    change-data files included; the Delta log's checkpoints hold no rows — and count the rows ``where`` matches
    in each (hive partition values from the file's path). What a compliance check after ``forget`` runs.

    Args:
        name: The dataset.
        where: The rows that must be gone, an SQL predicate (``"user_id = 42"``).
        storage_options: Credentials and options for the object store (as delta-rs/fsspec take them).
        catalog: A catalog URL or Catalog (default: ``$DAL_CATALOG_URL`` or the embedded SQLite catalog).

    Returns:
        The files scanned, those still holding matching rows (and how many), and those it could not check.

    Raises:
        DatasetNotFound: no dataset of that name.
        FilterError: ``where`` names an unknown column (checked against the latest version, like every filter).
    """
    from dal import expr as E

    validate.check(storage_options=storage_options, catalog=catalog)
    cat = get_catalog(catalog)
    info = cat.get_dataset(name)
    latest = cat.version(name)
    options = dict(storage_options or {})
    fmt = get_format(info.format)
    schema = fmt.arrow_schema(info.location, latest, options)
    bound = E.bind(E.as_expr(where), schema)
    physical = fmt.physical_schema(schema)  # Delta column mapping: the files' own column names
    stored = dict(zip(schema.names, (physical or schema).names, strict=True))
    needed = {c for c in bound.columns() if c in latest.partition_columns}
    loc = Location.of(info.location, options)
    scanned, found, unchecked = 0, [], []
    for listed in ownership.listing(loc, fmt.table_roots).files:  # never through a link
        rel = listed.rel
        if listed.link or not rel.endswith(".parquet") or fmt.is_record(rel):  # the log (checkpoints): no rows
            continue
        scanned += 1
        matched = _matching_rows(loc, rel, schema, stored, needed, bound)
        if matched is None:
            unchecked.append(rel)
        elif matched:
            found.append((rel, matched))
    return DeletedCheck(name, E.to_sql(bound), scanned, found, unchecked)


def _matching_rows(
    loc: Location, rel: str, schema: pa.Schema, stored: Mapping[str, str], needed: set[str], bound: Any
) -> int | None:
    """The rows of the file ``rel`` that ``bound`` matches: its columns as stored (``stored``: each column's name
    in the files), hive partition values from its path, columns it lacks as nulls; None when a partition column
    ``bound`` names (``needed``) is in neither."""
    from urllib.parse import unquote

    from dal import expr as E

    table = pq.read_table(loc.path(rel), filesystem=loc.fs)
    parts = dict(seg.split("=", 1) for seg in rel.split("/")[:-1] if "=" in seg)
    columns = {}
    for f in schema:
        name = stored.get(f.name, f.name)
        if f.name in needed and name not in table.column_names and f.name not in parts and name not in parts:
            return None
        if name in table.column_names:
            column = table.column(name)
            try:  # as the version's schema types it (a string_view file column: a string)
                columns[f.name] = column if column.type == f.type else column.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                columns[f.name] = column
        elif f.name in parts or name in parts:
            raw = unquote(parts.get(f.name, parts.get(name, "")))
            value = None if raw == "__HIVE_DEFAULT_PARTITION__" else raw
            columns[f.name] = pa.array([value] * table.num_rows, pa.string()).cast(f.type)
        else:
            columns[f.name] = pa.nulls(table.num_rows, f.type)
    rows = pa.table(columns)
    return int(rows.filter(E.to_arrow(bound, rows.schema)).num_rows)
