"""Transforms on the way to a framework: Petastorm's ``TransformSpec``, checked, for ``to_torch`` and ``to_tf``.

    def normalise(batch):                       # a dict of NumPy columns of one chunk, tensor fields decoded
        batch["image"] = batch["image"].astype(np.float32) / 255      # (rows, 64, 64, 3) uint8 -> float32
        batch["n_points"] = np.array([len(p) for p in batch["points"]], np.int64)
        return batch

    spec = dal.TransformSpec(
        normalise,
        edit_fields=[("image", np.float32, (64, 64, 3), False), ("n_points", np.int64, (), False)],
        removed_fields=["points"],
    )
    data = ds.to_torch(batch_size=64, transform=spec)          # or ds.to_tf(64, transform=spec)

The function runs once per chunk (whole row groups, tens of thousands of rows) on the reading thread or
DataLoader worker. It receives the chunk DECODED: with ``batch_format="numpy"`` (the default) a dict of NumPy
columns, tensor fields and numeric arrays of one shape stacked as ``(rows, *shape)`` arrays (a list of
per-row arrays where shapes vary or a value is null), strings as object arrays, timestamps as datetime64
(columns may be read-only views of the data read: make new arrays rather than writing in place);
with ``batch_format="pandas"`` a pandas DataFrame whose tensor/array cells are NumPy arrays (what Petastorm's
``make_batch_reader`` hands a TransformSpec, so Petastorm functions port unchanged). It returns the same
kind of thing (a dict or a DataFrame).

The output columns are the input columns minus ``removed_fields`` and minus the names in ``edit_fields``,
then the ``edit_fields`` appended in their order; with ``selected_fields`` only those, in that order
(Petastorm's ``transform_schema``). Every chunk's output is checked against them: a missing or undeclared
column, another row count, dtype or shape is a ``TransformError`` naming the field, what was declared and
what came, on the first chunk. Columns the function leaves but the spec drops are dropped. Fixed shapes
arrive stacked (torch ``(batch, *shape)`` tensors, TF ``TensorSpec((None, *shape))``); a ``None`` dimension
gives lists of tensors / ragged tensors.

The plain form ``transform=fn, output_schema=pa.schema(...)`` stays: ``fn`` receives the chunk as stored (an
Arrow RecordBatch, tensor fields encoded) and returns Arrow or pandas of exactly ``output_schema``; output
columns that keep a tensor field's name and storage type are decoded by its codec.

Framework-free: the adapters call ``bind`` (validation, before any read) and ``Bound.apply`` (per chunk).

Why one module: the checks of a ``TransformSpec`` (fields edited, removed, typed) and their application to a
chunk use the same schema-edit rules; split apart, a check would live away from what it checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.catalog.types import Schema
from dal.errors import DalError, require
from dal.tensors.codecs import shape_matches

if TYPE_CHECKING:
    from dal.read.source import Source

__all__ = ["Bound", "OutField", "TransformError", "TransformSpec", "bind", "edit_field"]

BatchFormat = Literal["numpy", "pandas"]
Shape = tuple[int | None, ...]


class TransformError(DalError, ValueError):
    """A transform spec that cannot apply, or a transform whose output does not match what it declared."""


def edit_field(
    name: str, numpy_dtype: Any, shape: Sequence[int | None] = (), nullable: bool = False
) -> tuple[str, Any, tuple[int | None, ...], bool]:
    """The ``(name, numpy_dtype, shape, nullable)`` tuple of ``edit_fields`` (as Petastorm's helper)."""
    return (name, numpy_dtype, tuple(shape), nullable)


@dataclass(frozen=True)
class OutField:
    """One column a transform hands on: NumPy dtype (``<U0`` strings, ``object`` anything else Python),
    shape per row (``None``: varies), and whether a row may be null."""

    name: str
    dtype: np.dtype[Any]
    shape: Shape = ()
    nullable: bool = False

    @property
    def fixed(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def kind(self) -> str:
        """'str', 'time', 'object' or 'number' (bool, int, uint, float, complex)."""
        k = self.dtype.kind
        return {"U": "str", "S": "str", "M": "time", "O": "object"}.get(k, "number")

    def describe(self) -> str:
        dtype = "str" if self.dtype.kind == "U" else str(self.dtype)
        return f"{dtype} of shape {self.shape}" if self.shape else dtype


class TransformSpec:
    """Petastorm's TransformSpec: a function over decoded chunks and the columns it produces.

    Args:
        func: called with each chunk (see ``batch_format``), returns the transformed chunk; None only
            edits the schema (e.g. ``removed_fields`` alone).
        edit_fields: ``(name, numpy_dtype, shape, nullable)`` tuples (``nullable`` may be left out): the
            columns ``func`` adds or changes. ``np.str_`` / ``str`` for strings (shape ``()``), ``None`` in a
            shape for a dimension that varies.
        removed_fields: input columns dropped from the output (``func`` may leave them; they are dropped).
        selected_fields: the output columns to keep, in this order (not with ``removed_fields``).
        batch_format: ``"numpy"`` (default: a dict of stacked NumPy columns; fastest for tensors) or
            ``"pandas"`` (a DataFrame with one NumPy array per tensor cell, as Petastorm's batch reader).

    Raises:
        TransformError: a bad argument (checked here; names against the data when bound by ``to_torch``/``to_tf``).
    """

    def __init__(
        self,
        func: Callable[[Any], Any] | None = None,
        edit_fields: Iterable[Sequence[Any]] | None = None,
        removed_fields: Iterable[str] | None = None,
        selected_fields: Iterable[str] | None = None,
        *,
        batch_format: BatchFormat = "numpy",
    ) -> None:
        if func is not None and not callable(func):
            raise TransformError(f"TransformSpec func must be callable or None, not {type(func).__name__}")
        if removed_fields is not None and selected_fields is not None:
            raise TransformError("TransformSpec takes removed_fields or selected_fields, not both")
        if batch_format not in ("numpy", "pandas"):
            raise TransformError(f"batch_format must be 'numpy' or 'pandas', not {batch_format!r}")
        self.func = func
        self.edit_fields: tuple[OutField, ...] = tuple(_edit_field(f) for f in (edit_fields or ()))
        self.removed_fields: tuple[str, ...] = _names(removed_fields, "removed_fields")
        self.selected_fields: tuple[str, ...] | None = (
            None if selected_fields is None else _names(selected_fields, "selected_fields")
        )
        self.batch_format: BatchFormat = batch_format
        names = [f.name for f in self.edit_fields]
        if func is None and names:
            raise TransformError(f"edit_fields {names} need a func that produces them (func is None)")
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise TransformError(f"edit_fields names a field more than once: {', '.join(dupes)}")
        chosen = list(self.selected_fields or ())
        dupes = sorted({n for n in chosen if chosen.count(n) > 1})
        if dupes:
            raise TransformError(f"selected_fields names a field more than once: {', '.join(dupes)}")

    def output_fields(self, inputs: Sequence[OutField]) -> list[OutField]:
        """The columns this spec produces from ``inputs`` (Petastorm's ``transform_schema``).

        Raises:
            TransformError: removed_fields or selected_fields name a column that is not there."""
        have = [f.name for f in inputs]
        unknown = [n for n in self.removed_fields if n not in have]
        if unknown:
            raise TransformError(f"removed_fields names columns the data does not have: {unknown} (it has {have})")
        edited = {f.name for f in self.edit_fields}
        out = [f for f in inputs if f.name not in edited and f.name not in self.removed_fields]
        out += list(self.edit_fields)
        if self.selected_fields is not None:
            by_name = {f.name: f for f in out}
            unknown = [n for n in self.selected_fields if n not in by_name]
            if unknown:
                raise TransformError(
                    f"selected_fields names columns the transform does not produce: {unknown} "
                    f"(it produces {list(by_name)})"
                )
            out = [by_name[n] for n in self.selected_fields]
        if not out:
            raise TransformError("the transform spec leaves no columns")
        return out

    def __repr__(self) -> str:
        func = getattr(self.func, "__name__", repr(self.func))
        return (
            f"TransformSpec({func}, edit_fields={[(f.name, f.describe()) for f in self.edit_fields]}, "
            f"removed_fields={list(self.removed_fields)}, selected_fields={self.selected_fields})"
        )


def _names(names: Iterable[str] | None, what: str) -> tuple[str, ...]:
    if names is None:
        return ()
    if isinstance(names, str):
        raise TransformError(f"{what} must be a list of column names, not a string")
    out = tuple(names)
    if not all(isinstance(n, str) for n in out):
        raise TransformError(f"{what} must be column names (strings): {list(out)}")
    return out


def _edit_field(f: Any) -> OutField:
    """An ``edit_fields`` entry as an output field: an OutField, ``(name, dtype, shape[, nullable])`` or
    petastorm's UnischemaField ``(name, dtype, shape, codec, nullable)``.

    Raises:
        TransformError: naming the entry and what is wrong with it.
    """
    if isinstance(f, OutField):
        return f
    if isinstance(f, str) or not isinstance(f, Sequence) or len(f) not in (3, 4, 5):
        raise TransformError(f"an edit_fields entry must be a tuple (name, numpy_dtype, shape, nullable), not {f!r}")
    if len(f) == 5:  # petastorm's UnischemaField: (name, numpy_dtype, shape, codec, nullable)
        name, dtype, shape, nullable = f[0], f[1], f[2], f[4]
    else:
        name, dtype, shape = f[0], f[1], f[2]
        nullable = f[3] if len(f) == 4 else False
    if not isinstance(name, str) or not name:
        raise TransformError(f"edit_fields: a field name must be a non-empty string, not {name!r}")
    if dtype is None:  # np.dtype(None) is float64: a forgotten dtype, not a choice
        raise TransformError(f"edit_fields {name!r}: the NumPy dtype is missing (None)")
    if nullable is None:  # as petastorm, where None reads as not nullable
        nullable = False
    if not isinstance(nullable, bool | np.bool_):
        raise TransformError(f"edit_fields {name!r}: nullable must be True or False, not {nullable!r}")
    np_dtype = _edit_dtype(name, dtype)
    return OutField(name, np_dtype, _edit_shape(name, np_dtype, shape), bool(nullable))


def _edit_dtype(name: str, dtype: Any) -> np.dtype[Any]:
    try:
        np_dtype: np.dtype[Any] = np.dtype(dtype)
    except (TypeError, ValueError) as e:
        raise TransformError(f"edit_fields {name!r}: {dtype!r} is not a NumPy dtype") from e
    if np_dtype.kind == "U":
        np_dtype = np.dtype(np.str_)
    if np_dtype.kind not in "biufcUSM":
        raise TransformError(f"edit_fields {name!r}: dtype {np_dtype} has no tensor form (numbers, bool, str)")
    return np_dtype


def _edit_shape(name: str, np_dtype: np.dtype[Any], shape: Any) -> tuple[int | None, ...]:
    if isinstance(shape, int) or not isinstance(shape, Sequence) or isinstance(shape, str):
        raise TransformError(f"edit_fields {name!r}: shape must be a tuple of ints (None: varies), not {shape!r}")
    if not all(d is None or (isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0) for d in shape):
        raise TransformError(f"edit_fields {name!r}: shape must hold non-negative ints or None, not {shape!r}")
    if np_dtype.kind in "USM" and tuple(shape) != ():
        raise TransformError(f"edit_fields {name!r}: {np_dtype} fields are scalars (shape ()), not {tuple(shape)}")
    return tuple(None if d is None else int(d) for d in shape)


# -- what a scan hands a transform -----------------------------------------------------------------


def _numeric_list(typ: pa.DataType) -> bool:
    if not (pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ)):
        return False
    return bool(pa.types.is_integer(typ.value_type) or pa.types.is_floating(typ.value_type))


def _codec_field(schema: Schema, name: str) -> Any:
    field = schema.get(name)
    return field if field is not None and field.codec not in (None, "scalar") and field.dtype else None


def arrow_field(name: str, typ: pa.DataType, schema: Schema, nullable: bool = True) -> OutField:
    """How a column of Arrow type ``typ`` arrives decoded (tensor fields by their codec's dtype and shape)."""
    field = _codec_field(schema, name)
    if field is not None and (pa.types.is_binary(typ) or pa.types.is_large_binary(typ)):
        named = {"str": np.str_, "bytes": np.bytes_, "decimal": object}.get(field.dtype, field.dtype)
        dtype = np.dtype(named)
        return OutField(name, dtype, tuple(field.shape or ()), field.nullable)
    if _numeric_list(typ):
        width = typ.list_size if pa.types.is_fixed_size_list(typ) else None
        return OutField(name, np.dtype(typ.value_type.to_pandas_dtype()), (width,), nullable)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return OutField(name, np.dtype(np.str_), (), nullable)
    if pa.types.is_timestamp(typ):
        return OutField(name, np.dtype("datetime64[us]"), (), nullable)
    if pa.types.is_date(typ):
        return OutField(name, np.dtype("datetime64[D]"), (), nullable)
    if pa.types.is_boolean(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ):
        return OutField(name, np.dtype(typ.to_pandas_dtype()), (), nullable)
    return OutField(name, np.dtype(object), (), nullable)


def decode(table: pa.Table, schema: Schema, fields: Mapping[str, OutField]) -> dict[str, Any]:
    """The columns of ``table`` decoded as a transform sees them (see the module docstring)."""
    from dal.tensors.schema import decode_table

    out: dict[str, Any] = {}
    codec = [n for n in table.column_names if n in fields and _codec_field(schema, n) is not None]
    codec = [n for n in codec if pa.types.is_binary(t := table.schema.field(n).type) or pa.types.is_large_binary(t)]
    if codec:
        out.update(decode_table(table.select(codec), schema))
    for name in table.column_names:
        if name in out:
            continue
        column = table.column(name).combine_chunks()
        if _numeric_list(column.type):
            out[name] = _list_values(column)
        else:
            out[name] = column.to_numpy(zero_copy_only=False)
    return {n: out[n] for n in table.column_names}


def _list_values(array: pa.Array) -> Any:
    """A numeric list column as (rows, n) when every row holds n non-null numbers, else one array per row."""
    values = array.flatten()
    rows = len(array)
    if not array.null_count and not values.null_count:
        if pa.types.is_fixed_size_list(array.type):
            n = array.type.list_size
        else:
            lengths = pc.list_value_length(array).to_numpy()
            n = int(lengths[0]) if rows else 0
            if rows and lengths.min() != lengths.max():
                n = -1
        if n >= 0:
            return values.to_numpy(zero_copy_only=False).reshape(rows, n)
    return [None if v is None else np.asarray(v) for v in array.to_numpy(zero_copy_only=False)]


# -- a transform bound to a scan -------------------------------------------------------------------


@dataclass(frozen=True)
class Bound:
    """A transform checked against a scan's columns; ``apply`` runs it on one chunk (picklable when the
    function is, for DataLoader workers)."""

    transform: TransformSpec | Callable[[Any], Any]
    inputs: tuple[OutField, ...]
    fields: tuple[OutField, ...]
    schema: Schema
    output_schema: pa.Schema | None = None

    def apply(self, table: pa.Table) -> tuple[int, dict[str, Any]]:
        """One chunk through the transform: (rows, columns) of the declared fields, checked and normalised
        (fixed shapes stacked, strings as object arrays of str).

        Raises:
            TransformError: the output does not match the declared fields."""
        rows = table.num_rows
        if rows == 0:  # nothing to transform: empty columns of the declared fields
            return 0, {f.name: _empty(f) for f in self.fields}
        if isinstance(self.transform, TransformSpec):
            spec = self.transform
            inputs = {f.name: f for f in self.inputs}
            if spec.func is None:  # only a schema edit: removed / unselected columns are not decoded
                table = table.select([f.name for f in self.fields if f.name in inputs])
            decoded = decode(table, self.schema, inputs)
            try:
                if spec.func is None:
                    out: Any = decoded
                elif spec.batch_format == "pandas":
                    out = spec.func(_to_pandas(decoded, rows))
                else:
                    out = spec.func(dict(decoded))
            except ValueError as e:
                if "read-only" not in str(e):
                    raise
                raise TransformError(
                    f"the transform wrote into a read-only input column ({e}): columns can be views of the "
                    "data read; make new arrays (x = x * 2, not x *= 2) or copy first"
                ) from e
            columns = _columns(out)
            dropped = set(inputs) | {f.name for f in spec.edit_fields} | set(spec.removed_fields)
            return rows, self._check(columns, rows, dropped, decoded)
        out = self.transform(table.combine_chunks().to_batches()[0] if rows else table)
        if not isinstance(out, pa.RecordBatch | pa.Table):
            out = pa.Table.from_pandas(out, preserve_index=False)
        result = pa.table(out) if isinstance(out, pa.RecordBatch) else out
        assert self.output_schema is not None
        if result.schema.names != self.output_schema.names or not all(
            a.type.equals(b.type) for a, b in zip(result.schema, self.output_schema, strict=True)
        ):
            raise TransformError(
                f"transform returned {_schema_text(result.schema)} but declared output_schema "
                f"{_schema_text(self.output_schema)}"
            )
        decoded = decode(result, self.schema, {f.name: f for f in self.fields})
        return result.num_rows, self._check(decoded, result.num_rows, set(), {})

    def _check(
        self, columns: Mapping[str, Any], rows: int, droppable: set[str], inputs: Mapping[str, Any]
    ) -> dict[str, Any]:
        names = [f.name for f in self.fields]
        missing = [n for n in names if n not in columns]
        extra = [n for n in columns if n not in names and n not in droppable]
        if missing or extra:
            parts = ([f"missing {missing}"] if missing else []) + ([f"undeclared {extra}"] if extra else [])
            raise TransformError(
                f"transform output columns do not match the declared fields: {'; '.join(parts)} "
                f"(declared: {names}; add new columns to edit_fields)"
            )
        out: dict[str, Any] = {}
        for f in self.fields:
            value = columns[f.name]
            if value is inputs.get(f.name, _MISSING) and not (f.fixed and isinstance(value, list)):
                out[f.name] = value  # an input column passed on as it was decoded
            else:
                out[f.name] = _conform(f, value, rows)
                plain = f in self.inputs and _codec_field(self.schema, f.name) is None  # a numeric list column
                if plain and not f.fixed and isinstance(out[f.name], list):
                    out[f.name] = _stack_if_even(out[f.name])  # as the input column arrives without a transform
                elif not plain and not f.fixed and isinstance(out[f.name], np.ndarray):
                    out[f.name] = list(out[f.name])  # a declared None dimension: one array per row, every chunk
        return out


def _stack_if_even(cells: list[Any]) -> Any:
    """Per-row arrays of one shape (no nulls) as one stacked array, as ``decode`` hands a numeric list column
    on (a DataFrame's cells, ``batch_format="pandas"``, come back per row)."""
    if not cells or any(c is None for c in cells) or len({c.shape for c in cells}) != 1:
        return cells
    return np.stack(cells)


_MISSING = object()


def _empty(f: OutField) -> Any:
    if f.kind in ("str", "object"):
        return np.empty(0, dtype=object)
    return np.empty((0, *f.shape), f.dtype) if f.fixed else []  # type: ignore[misc]


def _schema_text(schema: pa.Schema) -> str:
    return "(" + ", ".join(f"{f.name}: {f.type}" for f in schema) + ")"


def _columns(out: Any) -> Mapping[str, Any]:
    if isinstance(out, Mapping):
        return out
    if hasattr(out, "columns") and hasattr(out, "__getitem__") and type(out).__name__ == "DataFrame":
        return {str(c): out[c] for c in out.columns}
    hint = " (did it forget to return the batch?)" if out is None else ""
    raise TransformError(
        f"the transform must return a dict of columns or a pandas DataFrame, not {type(out).__name__}{hint}"
    )


def _to_pandas(decoded: Mapping[str, Any], rows: int) -> Any:
    pd = require("pandas", "pandas")

    data: dict[str, Any] = {}
    for name, values in decoded.items():
        if isinstance(values, np.ndarray) and values.ndim == 1:
            data[name] = values
        else:  # one NumPy array per cell, as petastorm's batch reader
            cells = np.empty(rows, dtype=object)
            for i in range(rows):
                cells[i] = values[i]
            data[name] = cells
    return pd.DataFrame(data, index=pd.RangeIndex(rows))


def _conform(f: OutField, value: Any, rows: int) -> Any:
    """``value`` as field ``f``'s column of ``rows`` rows, or a TransformError naming what is wrong."""
    given = type(value).__name__
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):  # pandas Series
        value = value.to_numpy()
    if isinstance(value, list | tuple):
        cells = list(value)
    elif isinstance(value, np.ndarray) and value.dtype.kind == "O" and (f.shape or f.kind != "str"):
        cells = list(value)
    elif isinstance(value, np.ndarray):
        cells = None
    else:
        try:
            value, cells = np.asarray(value), None
        except Exception as e:  # torch tensors and array-likes convert; anything else says what it was
            raise TransformError(f"field {f.name!r}: expected {f.describe()} values, got {type(value).__name__}") from e
    if cells is None and not value.ndim:
        raise TransformError(
            f"field {f.name!r}: the transform returned one value ({given}), not a column of "
            f"{rows} rows (np.full({rows}, value) repeats it)"
        )
    n = len(cells) if cells is not None else value.shape[0]
    if n != rows:
        raise TransformError(
            f"field {f.name!r}: the transform returned {n} rows for a chunk of {rows}; a transform keeps the "
            f"row count (filter rows with .filter(...) on the scan)"
        )
    if f.kind == "str":
        return _strings(f, value if cells is None else np.array(cells, dtype=object))
    if f.kind == "object":
        return value if cells is None else np.array(cells, dtype=object)
    if cells is None:
        got = value.dtype
        if f.kind == "time":
            if got.kind != "M":
                raise TransformError(f"field {f.name!r}: expected {f.describe()}, got {got}")
            return value.astype(f.dtype)
        if got != f.dtype:
            raise TransformError(f"field {f.name!r}: expected dtype {f.dtype}, got {got} (declared {f.describe()})")
        if not shape_matches(value.shape[1:], f.shape):
            raise TransformError(
                f"field {f.name!r}: expected shape {f.shape} per row, got {value.shape[1:]} (a {value.shape} array)"
            )
        return value
    return _cells(f, cells)


def _strings(f: OutField, value: np.ndarray) -> np.ndarray:
    if value.ndim != 1:
        raise TransformError(f"field {f.name!r}: expected one string per row, got an array of shape {value.shape}")
    if value.dtype.kind in "US":
        return value.astype(object)
    if value.dtype.kind != "O":
        raise TransformError(f"field {f.name!r}: expected str, got {value.dtype}")
    for i, v in enumerate(value):
        if v is None:
            if not f.nullable:
                raise TransformError(f"field {f.name!r}, row {i}: null in a field not declared nullable")
        elif not isinstance(v, str | bytes):
            raise TransformError(f"field {f.name!r}, row {i}: expected str, got {type(v).__name__}")
    return value


def _cells(f: OutField, cells: list[Any]) -> Any:
    """Per-row values (lists, object columns of a DataFrame) checked, then stacked when the shape is fixed."""
    checked: list[Any] = []
    for i, v in enumerate(cells):
        if v is None:
            if not f.nullable:
                raise TransformError(f"field {f.name!r}, row {i}: null in a field not declared nullable")
            checked.append(None)
            continue
        a = v if isinstance(v, np.ndarray) else np.asarray(v)
        if f.kind == "time" and a.dtype.kind == "M":
            a = a.astype(f.dtype)
        if a.dtype != f.dtype:
            raise TransformError(f"field {f.name!r}, row {i}: expected dtype {f.dtype}, got {a.dtype}")
        if not shape_matches(a.shape, f.shape):
            raise TransformError(f"field {f.name!r}, row {i}: expected shape {f.shape}, got {a.shape}")
        checked.append(a)
    if f.fixed and all(a is not None for a in checked):
        return np.stack(checked) if checked else np.empty((0, *f.shape), f.dtype)  # type: ignore[misc]
    return checked


def scan_fields(scan: Source, shapes: Mapping[str, Shape] | None = None) -> list[OutField]:
    """The columns ``scan`` yields as a transform sees them; ``shapes`` overrides some (e.g. array widths)."""
    schema = scan.arrow_schema
    fields = [
        arrow_field(n, schema.field(n).type, scan.dataset.schema, schema.field(n).nullable) for n in scan.output_names
    ]
    shapes = shapes or {}
    return [OutField(f.name, f.dtype, tuple(shapes[f.name]), f.nullable) if f.name in shapes else f for f in fields]


def bind(
    transform: Any,
    output_schema: pa.Schema | None,
    scan: Source,
    shapes: Mapping[str, Shape] | None = None,
) -> Bound:
    """Check ``transform`` (a TransformSpec, or a function with its ``output_schema``) against ``scan``
    before anything is read.

    Raises:
        TransformError: see ``TransformSpec``; a function without output_schema; output_schema with a spec."""
    inputs = scan_fields(scan, shapes)
    if isinstance(transform, TransformSpec):
        if output_schema is not None:
            raise TransformError("output_schema goes with a plain function; a TransformSpec declares edit_fields")
        return Bound(transform, tuple(inputs), tuple(transform.output_fields(inputs)), scan.dataset.schema)
    if not callable(transform):
        raise TransformError(f"transform must be a dal.TransformSpec or a function, not {type(transform).__name__}")
    if output_schema is None:
        raise TransformError("a transform must declare its output_schema (the columns and types it returns)")
    if not isinstance(output_schema, pa.Schema):
        raise TransformError(f"output_schema must be a pyarrow.Schema, not {type(output_schema).__name__}")
    by_name = {f.name: f for f in inputs}
    fields = []
    for af in output_schema:
        f = arrow_field(af.name, af.type, scan.dataset.schema, af.nullable)
        same = f.name in by_name and af.type.equals(scan.arrow_schema.field(f.name).type)
        fields.append(by_name[f.name] if same else f)  # an input column kept as it is: its refined shape
    return Bound(transform, tuple(inputs), tuple(fields), scan.dataset.schema, output_schema)
