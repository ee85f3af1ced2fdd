"""A schema described as data for tensor datasets, compatible with Petastorm's ``Unischema``.

Schema = TensorSchema("Scans", [
    TensorField("id", np.int64, (), ScalarCodec()),
    TensorField("image", np.uint8, (64, 64, 3), ImageCodec("png")),
    TensorField("points", np.float32, (None, 3), NdarrayCodec(), nullable=True),
])
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from dal.catalog.types import Field, Schema
from dal.errors import DalError, FormatError, SchemaMismatch
from dal.tensors.codecs import Codec, ScalarCodec, codec_from_spec, default_storage, dtype_name


@dataclass(frozen=True)
class TensorField:
    """One field: name, numpy dtype, shape (``None`` for a variable dimension, ``()`` for scalars), codec."""

    name: str
    dtype: Any
    shape: tuple[int | None, ...] = ()
    codec: Codec | None = None
    nullable: bool = False
    dtype_name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype_name", dtype_name(self.dtype))
        object.__setattr__(self, "shape", tuple(self.shape))
        if self.codec is None:
            if self.shape != ():
                raise SchemaMismatch(f"field {self.name!r}: a non-scalar field needs a codec (e.g. NdarrayCodec())")
            object.__setattr__(self, "codec", ScalarCodec())
        elif isinstance(self.codec, ScalarCodec) and self.codec.storage is not None:
            default = default_storage(self.dtype_name)
            if default is not None and str(default) == self.codec.storage:  # one spelling of each codec
                object.__setattr__(self, "codec", ScalarCodec())

    @property
    def the_codec(self) -> Codec:
        assert self.codec is not None
        return self.codec

    def storage_type(self) -> pa.DataType:
        return self.the_codec.storage_type(self.dtype_name)

    def to_catalog(self) -> Field:
        return Field(
            name=self.name,
            type=str(self.storage_type()),
            nullable=self.nullable,
            dtype=self.dtype_name,
            shape=self.shape,
            codec=self.the_codec.describe(),
        )

    @classmethod
    def from_catalog(cls, f: Field) -> TensorField:
        return cls(f.name, f.dtype or "float64", f.shape or (), codec_from_spec(f.codec, f.type), f.nullable)


@dataclass(frozen=True)
class TensorSchema:
    """An ordered set of tensor fields with a name (Petastorm's Unischema, as a plain value)."""

    name: str
    fields: tuple[TensorField, ...]

    def __init__(self, name: str, fields: Iterable[TensorField]) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", tuple(fields))
        names = [f.name for f in self.fields]
        # petastorm turns the schema and its fields into namedtuples: all must be identifiers
        bad = [n for n in [name, *names] if not n.isidentifier()]
        if bad:
            raise SchemaMismatch(
                f"schema {name!r}: names must be Python identifiers (readers make namedtuples of rows): {bad}"
            )
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SchemaMismatch(f"schema {name!r} has duplicate fields: {', '.join(dupes)}")

    def __iter__(self) -> Iterator[TensorField]:
        return iter(self.fields)

    def __getitem__(self, name: str) -> TensorField:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def arrow_schema(self) -> pa.Schema:
        """The Arrow (storage) schema: encoded fields are binary, scalars keep their type."""
        return pa.schema([pa.field(f.name, f.storage_type(), nullable=f.nullable) for f in self.fields])

    def to_catalog(self) -> Schema:
        return Schema(tuple(f.to_catalog() for f in self.fields))

    @classmethod
    def from_catalog(cls, name: str, schema: Schema) -> TensorSchema:
        return cls(name, [TensorField.from_catalog(f) for f in schema])


def fixed_shape(typ: pa.DataType) -> tuple[int, ...] | None:
    """The shape of a fixed-shape tensor type (fixed-size lists, nested or not, of integers or floats), else None."""
    shape: list[int] = []
    while pa.types.is_fixed_size_list(typ):
        shape.append(typ.list_size)
        typ = typ.value_type
    return tuple(shape) if shape and (pa.types.is_integer(typ) or pa.types.is_floating(typ)) else None


def _levels(array: pa.Array, shape: tuple[int, ...]) -> list[pa.Array]:
    """The rows' slices of each level of a fixed-shape tensor column, outermost first, the values last."""
    levels = [array]
    for size in shape:
        levels.append(levels[-1].values.slice(levels[-1].offset * size, len(levels[-1]) * size))
    return levels


def has_nulls(array: pa.Array, shape: tuple[int, ...]) -> bool:
    """Whether a fixed-shape tensor column holds a null cell, a null row inside a cell or a null value."""
    return any(level.null_count for level in _levels(array, shape))


def stack_fixed(array: pa.Array, shape: tuple[int, ...]) -> np.ndarray:
    """A fixed-shape tensor column (``fixed_shape(array.type) == shape``) as one (rows, *shape) array: the one
    values buffer viewed, not copied. With nulls (``has_nulls``), a null cell holds whatever its slots hold
    and a null value is NaN (the array float): see ``tensor_column``."""
    tensor: np.ndarray = _levels(array, shape)[-1].to_numpy(zero_copy_only=False).reshape(len(array), *shape)
    return tensor


def tensor_column(column: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """A fixed-shape tensor column (Delta ``FixedSizeList``, nested for N-D) as NumPy, as every read path gives
    it: one (rows, *shape) array of its value type when nothing in it is null; with nulls, an object array of
    one (*shape) array per row, None for a null cell (a null value inside a cell is NaN, that cell float).
    None when the column is not a fixed-shape tensor column."""
    shape = fixed_shape(column.type)
    if shape is None:
        return None
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    tensor = stack_fixed(array, shape)
    if not has_nulls(array, shape):
        return tensor
    valid = array.is_valid().to_numpy(zero_copy_only=False)
    cells = np.empty(len(array), dtype=object)
    for i in range(len(array)):
        cells[i] = tensor[i] if valid[i] else None
    return cells


def decode_table(table: pa.Table, schema: Schema) -> dict[str, Any]:
    """Decode every field of ``table`` as petastorm's ``make_reader`` does (see ``dal.tensors.codecs``), one NumPy
    column each (tensors stacked when shapes agree); columns without tensor metadata as plain NumPy, a
    fixed-shape tensor column (Delta) as ``tensor_column`` gives it."""
    out: dict[str, Any] = {}
    for name in table.column_names:
        field = schema.get(name)
        chunked = table.column(name)  # one chunk as it is: combine_chunks copies even a single chunk's buffers
        column = chunked.chunk(0) if chunked.num_chunks == 1 else chunked.combine_chunks()
        if field is None or field.dtype is None:
            tensor = tensor_column(column)
            out[name] = column.to_numpy(zero_copy_only=False) if tensor is None else tensor
            continue
        try:
            tf = _tensor_field(field)
        except TypeError:  # a field built with a list for its shape does not hash: built here, as before
            tf = TensorField.from_catalog(field)
        try:
            out[name] = tf.the_codec.decode(tf.dtype_name, tf.shape, column)
        except (DalError, ValueError, TypeError, pa.ArrowException) as e:
            raise FormatError(f"field {name!r}: cannot decode its {field.codec or 'scalar'} values: {e}") from e
    return out


@functools.lru_cache(maxsize=256)
def _tensor_field(f: Field) -> TensorField:
    """``TensorField.from_catalog``, once per catalog field (a chunk decodes its fields with it: the codec and
    dtype name built once per column, not once per chunk)."""
    return TensorField.from_catalog(f)


def to_pandas_cells(table: pa.Table) -> Any:
    """``table.to_pandas()`` with each fixed-shape tensor column holding one (*shape) array per cell (None for a
    null cell) instead of pyarrow's nested object arrays: the cells ``to_numpy`` stacks."""
    import pandas as pd

    frame = table.to_pandas()
    for name in table.column_names:
        tensor = tensor_column(table.column(name))
        if tensor is not None:
            frame[name] = pd.Series(list(tensor), index=frame.index, dtype=object)
    return frame
