"""Arrow columns to and from numpy without pyarrow's pandas shim.

``Array.to_numpy``, ``ChunkedArray.to_numpy``, ``pa.array`` and ``pa.scalar`` of Python or numpy values import
pandas the first time a process converts: ~0.25 s CPU of a fresh process's first plan or register, which
delta-rs's own load does not pay. These go through the values' buffers instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa


def int64s(values: pa.Array | pa.ChunkedArray, null: int = 0) -> np.ndarray:
    """``values`` (any integer type) as a fresh int64 numpy array, each NULL as ``null``."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = values.cast(pa.int64())
    n = len(values)
    if values.null_count == n:
        return np.full(n, null, dtype=np.int64)
    out = np.frombuffer(values.buffers()[1], dtype=np.int64, count=n, offset=values.offset * 8).copy()
    if values.null_count:
        out[~valid(values)] = null
    return out


def valid(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean numpy mask of the values that are not NULL."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    n = len(values)
    if not values.null_count:
        return np.ones(n, dtype=bool)
    if values.type == pa.null():
        return np.zeros(n, dtype=bool)
    bits = np.unpackbits(np.frombuffer(values.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[values.offset : values.offset + n].astype(bool)


def from_int64s(values: np.ndarray | Sequence[int], typ: pa.DataType | None = None) -> pa.Array:
    """Integers as an Arrow int64 array (or ``typ``: int32, int8, ...) without NULLs."""
    typ = pa.int64() if typ is None else typ
    data = np.ascontiguousarray(values, dtype=np.dtype(f"int{typ.bit_width}"))
    return pa.Array.from_buffers(typ, len(data), [None, pa.py_buffer(data)])


def with_nulls(values: pa.Array, mask: np.ndarray) -> pa.Array:
    """``values`` (a fixed-width array without NULLs) with NULL where ``mask`` is False."""
    bits = pa.py_buffer(np.packbits(np.asarray(mask, dtype=bool), bitorder="little"))
    return pa.Array.from_buffers(values.type, len(values), [bits, values.buffers()[1]], offset=values.offset)


def trues(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as numpy, NULL as False."""
    return int64s(values.cast(pa.int8())).astype(bool)


def mask(values: np.ndarray) -> pa.Array:
    """A numpy boolean array as an Arrow boolean array (for ``filter``)."""
    flags = np.asarray(values, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), len(flags), [None, pa.py_buffer(np.packbits(flags, bitorder="little"))])


def strings(values: Sequence[str]) -> pa.Array:
    """Python texts as an Arrow string array without NULLs."""
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def combinations(columns: Sequence[pa.Array | pa.ChunkedArray]) -> tuple[list[list[Any]], np.ndarray, np.ndarray]:
    """The distinct combinations of the columns' values (NULL one of them), numbered: each column's distinct values
    as Python objects, the combinations as indices into them (one row per column, one column per combination,
    sorted), and each row's combination."""
    encoded = [
        (c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c).dictionary_encode(null_encoding="encode")
        for c in columns
    ]
    codes = np.stack([int64s(e.indices) for e in encoded])
    if len(encoded) == 1:
        keys, of = np.arange(len(encoded[0].dictionary))[None, :], codes[0]
    else:
        keys, of = np.unique(codes, axis=1, return_inverse=True)
    return [e.dictionary.to_pylist() for e in encoded], keys, np.asarray(of, dtype=np.intp).reshape(-1)
