"""Arrow types a format cannot store as they are, kept in the column's metadata and restored on read.

Delta has no unsigned integers, no fixed-size lists and no half-precision floats. A column written with
such a type is stored in a type Delta holds, and its field metadata (Delta column metadata, which delta-rs
and Spark keep and show) records the Arrow type it was written with, so that every dal read hands it back
exactly as written:

- a **fixed-shape tensor** (a fixed-size list, possibly of fixed-size lists, of integers or floats of any
  width, unsigned and float16 included) is stored as ``binary``: each cell is its values' bytes, C order,
  little-endian, ``prod(shape) * itemsize`` bytes (half the bytes of the ``list<int16>`` a uint8 tensor
  would otherwise become). Other readers (delta-rs, Spark) read a binary column; ``dal.tensor`` in its
  metadata says ``{"dtype": "uint8", "shape": [64, 64, 3], ...}``. dal restores a chunk of it as one
  contiguous buffer, without a copy per cell;
- any other column holding an unsigned integer (``uint8``, ``list<uint16>``, a struct with a ``uint32``
  field, …) is stored widened (``dal.formats.delta.types``) and cast back, value-checked.

``ARROW_TYPE_KEY`` holds the written type (an Arrow IPC schema, base64); ``TYPE_TEXT_KEY`` the same type
for people.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dal.errors import FormatError, SchemaMismatch

ARROW_TYPE_KEY = b"dal.arrow_type"
TYPE_TEXT_KEY = b"dal.arrow_type.text"
TENSOR_KEY = b"dal.tensor"


def tensor_shape(t: pa.DataType) -> tuple[tuple[int, ...], pa.DataType] | None:
    """(shape, element type) when ``t`` is a fixed-shape numeric tensor: fixed-size lists (nested or not) of
    integers or floats; else None."""
    shape: list[int] = []
    while pa.types.is_fixed_size_list(t):
        shape.append(t.list_size)
        t = t.value_type
    if shape and (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return tuple(shape), t
    return None


def _has_unsigned(t: pa.DataType) -> bool:
    if pa.types.is_unsigned_integer(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_unsigned(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _has_unsigned(t.key_type) or _has_unsigned(t.item_type)
    if pa.types.is_dictionary(t):
        return _has_unsigned(t.value_type)
    value = getattr(t, "value_type", None)
    return value is not None and _has_unsigned(value)


def recorded(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is stored in another type, with ``t`` recorded in its metadata."""
    return tensor_shape(t) is not None or _has_unsigned(t)


def _type_bytes(t: pa.DataType) -> bytes:
    return base64.b64encode(pa.schema([pa.field("t", t)]).serialize().to_pybytes())


def written_type(field: pa.Field) -> pa.DataType | None:
    """The Arrow type ``field`` (as stored) was written with, from its metadata; None when not recorded.

    Raises:
        FormatError: the metadata is not a type dal recorded, or not one the stored column can hold (a tensor
            not in binary cells, or its ``dal.tensor`` naming another dtype or shape; text or floats where
            unsigned integers were widened).
    """
    raw = (field.metadata or {}).get(ARROW_TYPE_KEY)
    if raw is None:
        return None
    try:
        t: pa.DataType = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw))).field(0).type
    except Exception as e:
        raise FormatError(f"column {field.name!r}: its {ARROW_TYPE_KEY.decode()} metadata is not a type: {e}") from e
    # metadata is anyone's to write (delta-rs and Spark keep it): trusted as is, it decoded a string column's
    # bytes as tensors, read an int64 column's buffers as binary offsets, parsed text as numbers
    why = _tensor_disagreement(field, t) if tensor_shape(t) is not None else _stored_mismatch(field.type, t)
    if why is not None:
        raise FormatError(
            f"column {field.name!r} ({field.type}) has {ARROW_TYPE_KEY.decode()} metadata saying it holds {t}, "
            f"but {why}; dal did not write it so (another tool changed the column or its metadata): drop or "
            "correct the metadata"
        )
    return t


def _tensor_disagreement(field: pa.Field, t: pa.DataType) -> str | None:
    """Why ``field`` cannot hold the tensor type ``t`` as ``encode_tensor`` stores it, or None."""
    if not (pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type)):
        return "a tensor is stored as binary cells of its bytes"
    raw = (field.metadata or {}).get(TENSOR_KEY)
    if raw is None:  # the type alone says everything the cells need
        return None
    written = json.loads(stored_field(pa.field(field.name, t), field.type).metadata[TENSOR_KEY])
    try:
        said = json.loads(raw)
    except ValueError:
        said = None
    if isinstance(said, dict) and all(said.get(k) == v for k, v in written.items()):  # other keys: not dal's
        return None
    text = raw[:200].decode("utf-8", "replace")
    return f"its {TENSOR_KEY.decode()} metadata says {text} (where that type is {json.dumps(written)})"


def _kind(t: pa.DataType) -> str:
    """What a leaf holds, as Delta stores it (every string kind is a string, every timestamp unit a timestamp …)."""
    kinds = (("string", pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view),
             ("binary", pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view,
              pa.types.is_fixed_size_binary),
             ("integer", pa.types.is_integer), ("float", pa.types.is_floating), ("decimal", pa.types.is_decimal),
             ("timestamp", pa.types.is_timestamp), ("date", pa.types.is_date))  # fmt: skip
    return next((k for k, *tests in kinds if any(test(t) for test in tests)), str(t))


def _lists(t: pa.DataType) -> bool:
    return any(is_(t) for is_ in (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list,
                                  pa.types.is_list_view, pa.types.is_large_list_view))  # fmt: skip


def _stored_mismatch(stored: pa.DataType, t: pa.DataType) -> str | None:
    """Why a column stored as ``stored`` is not one dal wrote as ``t`` (unsigned integers widened, the rest
    as Delta stores it: ``dal.formats.delta.types``), or None; a cast would otherwise parse text as numbers."""
    if pa.types.is_dictionary(stored):
        stored = stored.value_type
    if pa.types.is_dictionary(t):
        return _stored_mismatch(stored, t.value_type)
    if pa.types.is_struct(t):
        if not pa.types.is_struct(stored) or [f.name for f in stored] != [f.name for f in t]:
            return f"it is stored as {stored}, not a struct of fields {[f.name for f in t]}"
        return next((w for a, b in zip(stored, t, strict=True) if (w := _stored_mismatch(a.type, b.type))), None)
    if pa.types.is_map(t):
        if not pa.types.is_map(stored):
            return f"it is stored as {stored}, not a map"
        return _stored_mismatch(stored.key_type, t.key_type) or _stored_mismatch(stored.item_type, t.item_type)
    if _lists(t):
        return _stored_mismatch(stored.value_type, t.value_type) if _lists(stored) else f"{stored} is not a list"
    if _kind(stored) != _kind(t):
        return f"its values are stored as {stored}, not {_kind(t)}s"
    return None


def stored_field(field: pa.Field, stored_type: pa.DataType) -> pa.Field:
    """``field`` stored as ``stored_type``, with its written type recorded in its metadata."""
    meta: dict[bytes, bytes] = dict(field.metadata or {})
    meta[ARROW_TYPE_KEY] = _type_bytes(field.type)
    meta[TYPE_TEXT_KEY] = str(field.type).encode()
    tensor = tensor_shape(field.type)
    if tensor is not None:
        shape, value = tensor
        meta[TENSOR_KEY] = json.dumps(
            {"dtype": str(value.to_pandas_dtype().__name__), "shape": list(shape), "order": "C", "byteorder": "little"}
        ).encode()
    return pa.field(field.name, stored_type, field.nullable, meta)


def logical_schema(stored: pa.Schema) -> pa.Schema:
    """``stored`` with each recorded column's written type (the schema of what a read returns)."""
    if not any(f.metadata and ARROW_TYPE_KEY in f.metadata for f in stored):
        return stored
    fields = []
    for f in stored:
        t = written_type(f)
        fields.append(f if t is None else _logical_field(f, t))
    return pa.schema(fields, metadata=stored.metadata)


def _logical_field(f: pa.Field, t: pa.DataType) -> pa.Field:
    """``f`` as written: type ``t``, without dal's records of it (a table read is written anywhere as is)."""
    meta = {k: v for k, v in (f.metadata or {}).items() if k not in (ARROW_TYPE_KEY, TYPE_TEXT_KEY, TENSOR_KEY)}
    return pa.field(f.name, t, f.nullable, meta or None)


def restorers(stored: pa.Schema) -> Mapping[str, pa.DataType]:
    """Column name -> written type, for the recorded columns of ``stored``."""
    out = {}
    for f in stored:
        t = written_type(f)
        if t is not None:
            out[f.name] = t
    return out


def _flat_values(arr: pa.Array, shape: tuple[int, ...]) -> pa.Array:
    """The element values of a (nested) fixed-size list array, ``len(arr) * prod(shape)`` of them, in order
    (the values behind null cells included), slicing offsets honoured."""
    values = arr
    for size in shape:
        values = values.values.slice(values.offset * size, len(values) * size)
    return values


def encode_tensor(column: pa.Array | pa.ChunkedArray, name: str) -> pa.Array:
    """A fixed-shape tensor column as binary cells of its bytes (C order, little-endian); null cells null.

    Raises:
        SchemaMismatch: a cell holds a null element (a tensor's bytes have no place for one).
    """
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    found = tensor_shape(arr.type)
    assert found is not None, arr.type
    shape, value_type = found
    values = _flat_values(arr, shape)
    if values.null_count:  # behind null cells (nothing to keep: filled), or inside a tensor (refused)
        cells = arr.drop_null()
        for _ in shape:
            cells = cells.flatten()
        if cells.null_count or len(cells) != (len(arr) - arr.null_count) * math.prod(shape):
            raise SchemaMismatch(
                f"column {name!r} ({arr.type}): a tensor holds a null element, which its stored bytes cannot; "
                "fill it (e.g. with 0 or NaN) or store the column as a list"
            )
        values = values.fill_null(pa.scalar(0, value_type))
    data = np.ascontiguousarray(values.to_numpy(zero_copy_only=False)).astype(
        np.dtype(value_type.to_pandas_dtype()).newbyteorder("<"), copy=False
    )
    width = math.prod(shape) * data.itemsize
    kind, dtype = (pa.binary(), np.int32) if len(arr) * width < 2**31 else (pa.large_binary(), np.int64)
    offsets = np.arange(0, (len(arr) + 1) * width, width, dtype=dtype)
    out = pa.Array.from_buffers(kind, len(arr), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if arr.null_count:
        out = pc.if_else(arr.is_null(), pa.scalar(None, kind), out)
    return out


def decode_tensor(column: pa.Array | pa.ChunkedArray, logical: pa.DataType, name: str) -> pa.Array:
    """Binary cells written by ``encode_tensor`` as the tensor type ``logical``: a chunk's values are one
    buffer, shared with the binary column (no copy) when no cell is null.

    Raises:
        FormatError: a non-null cell does not hold the bytes of one tensor of that shape and type.
    """
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    found = tensor_shape(logical)
    assert found is not None, logical
    shape, value_type = found
    n = math.prod(shape)
    width = n * (value_type.bit_width // 8)
    if len(arr) == 0:
        return pa.array([], type=logical)
    if arr.null_count:  # null cells are stored empty: give them a tensor's bytes so that cells sit `width` apart
        arr = arr.fill_null(pa.scalar(b"\0" * width, arr.type))
    large = pa.types.is_large_binary(arr.type)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if large else np.int32)[
        arr.offset : arr.offset + len(arr) + 1
    ]
    lengths = np.diff(offsets)
    if lengths.size and (lengths.min() != width or lengths.max() != width):
        bad = int(np.flatnonzero(lengths != width)[0])
        raise FormatError(
            f"column {name!r}: a cell holds {int(lengths[bad])} bytes where a {logical} tensor needs {width} "
            "(the column was written by another tool?)"
        )
    data = arr.buffers()[2].slice(int(offsets[0]), len(arr) * width)
    values: pa.Array = pa.Array.from_buffers(value_type, len(arr) * n, [None, data])
    types = [logical]
    for _ in shape[1:]:
        types.append(types[-1].value_type)
    for t in reversed(types[1:]):
        values = pa.FixedSizeListArray.from_arrays(values, type=t)
    mask = column.is_null() if isinstance(column, pa.Array) else column.combine_chunks().is_null()
    return pa.FixedSizeListArray.from_arrays(values, type=logical, mask=mask if column.null_count else None)


def restore(table: pa.Table, types: Mapping[str, pa.DataType]) -> pa.Table:
    """``table`` (as read from storage) with each column of ``types`` (``restorers``) back in its written type.

    Raises:
        FormatError: a stored value does not fit the written type (another tool wrote it).
    """
    if not types:
        return table
    for i, name in enumerate(table.column_names):
        logical = types.get(name)
        if logical is None:
            continue
        column = table.column(i)
        if tensor_shape(logical) is not None:
            restored: pa.Array | pa.ChunkedArray = decode_tensor(column, logical, name)
        else:
            try:
                restored = column.cast(logical, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise FormatError(
                    f"column {name!r}: a stored value does not fit its written type {logical}: {e}"
                ) from e
        table = table.set_column(i, _logical_field(table.field(i), logical), restored)
    return table
