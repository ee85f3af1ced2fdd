"""TensorFlow: a scan as a ``tf.data.Dataset`` with a full ``element_spec``, ready for ``model.fit``.

    data = dal.open("weather.radar", "prod").select("image", "label").shard(hvd.rank(), hvd.size()).to_tf(64)
    data.element_spec   # {'image': TensorSpec((None, 64, 64, 3), tf.uint8), 'label': TensorSpec((None,), tf.int64)}
    model.fit(data.map(lambda d: (d["image"], d["label"])), epochs=3)

Built on the same chunk pipeline as ``to_torch``: a generator of whole chunks (read, decoded and
converted once on reader threads) with a fixed ``output_signature``, cut into batches by tf.data's
``rebatch`` (native code, no Python per batch). Each pass over the dataset (each Keras epoch) reads the
scan's next epoch, so shuffled scans reshuffle. Ranks come from ``Scan.shard`` (Horovod: ``hvd.rank()``,
``hvd.size()``); every rank yields the same number of batches. Fixed-shape tensor fields keep their
shape; variable-shape ones (a ``None`` in their shape) become ``tf.RaggedTensor``s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.adapters.arrays import check_footers, fixed, numeric_list, rows
from dal.adapters.arrays import widths as array_widths
from dal.errors import DalError, require

if TYPE_CHECKING:
    from dal.scan import Scan


def _tf() -> Any:
    return require("tensorflow", "tf")


def element_spec(scan: Scan) -> dict[str, Any]:
    """The TensorSpec (RaggedTensorSpec for variable shapes) of every column the scan yields, batched."""
    tf = _tf()
    spec: dict[str, Any] = {}
    arrays = [n for n in scan.output_names if _plain(scan, n) and numeric_list(scan.arrow_schema.field(n).type)]
    widths = array_widths(scan, arrays) if arrays else {}
    check_footers(scan, widths)
    for name in scan.output_names:
        field = scan.dataset.schema.get(name)
        typ = scan.arrow_schema.field(name).type
        if field is not None and field.codec not in (None, "scalar"):
            shape = (None, *tuple(field.shape or ()))
            dtype = tf.as_dtype(np.dtype(field.dtype))
            if any(d is None for d in shape[1:]):
                ragged_rank = max(i for i, d in enumerate(shape) if d is None)
                spec[name] = tf.RaggedTensorSpec(shape, dtype, ragged_rank=ragged_rank, row_splits_dtype=tf.int64)
            else:
                spec[name] = tf.TensorSpec(shape, dtype, name=name)
        elif name in widths:  # numeric arrays: one length in the data -> (None, n), else ragged
            dtype = tf.as_dtype(typ.value_type.to_pandas_dtype())
            width = widths[name]
            if width is None:
                spec[name] = tf.RaggedTensorSpec((None, None), dtype, ragged_rank=1, row_splits_dtype=tf.int64)
            else:
                spec[name] = tf.TensorSpec((None, width), dtype, name=name)
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            spec[name] = tf.TensorSpec((None,), tf.string, name=name)
        elif pa.types.is_timestamp(typ) or pa.types.is_date(typ):
            spec[name] = tf.TensorSpec((None,), tf.int64, name=name)  # microseconds / days since the epoch
        elif pa.types.is_boolean(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ):
            spec[name] = tf.TensorSpec((None,), tf.as_dtype(typ.to_pandas_dtype()), name=name)
        else:
            raise DalError(f"column {name!r} of type {typ} has no TensorFlow form: select other columns")
    return spec


def _plain(scan: Scan, name: str) -> bool:
    """Whether a column has no tensor codec (its Arrow values are what it holds)."""
    field = scan.dataset.schema.get(name)
    return field is None or field.codec in (None, "scalar")


def _numpy(values: Any, typ: pa.DataType) -> Any:
    if isinstance(values, np.ndarray) and values.dtype.kind == "M":
        unit = "datetime64[D]" if pa.types.is_date(typ) else "datetime64[us]"
        return values.astype(unit).astype(np.int64)
    if (
        isinstance(values, np.ndarray)
        and values.dtype.kind == "O"
        and (pa.types.is_string(typ) or pa.types.is_large_string(typ))
    ):
        return values.astype(str)
    return values


def _ragged(values: Any, spec: Any) -> Any:
    """A list of arrays of varying shape as one tf.RaggedTensor (nested row lengths, one concatenation)."""
    tf = _tf()
    k = spec.ragged_rank
    dtype = spec.dtype.as_numpy_dtype
    arrays = [np.zeros((0,) * (len(spec.shape) - 1), dtype) if v is None else np.asarray(v, dtype) for v in values]
    if isinstance(values, np.ndarray) and values.dtype.kind != "O":  # shapes agreed in this chunk: stacked
        arrays = list(values)
    lengths = []
    for j in range(k):  # level j: the length of axis j of every sub-array at that depth
        lengths.append(
            np.concatenate([np.full(int(np.prod(a.shape[:j])), a.shape[j], np.int64) for a in arrays])
            if arrays
            else np.zeros(0, np.int64)
        )
    inner = spec.shape[k + 1 :].as_list()
    flat = (
        np.concatenate([a.reshape(-1, *a.shape[k:]) for a in arrays])
        if arrays
        else np.zeros((0, *[d or 0 for d in inner]), dtype)
    )
    return tf.RaggedTensor.from_nested_row_lengths(flat, lengths)


def to_tf(scan: Scan, batch_size: int = 256, *, prefetch: int | None = None) -> Any:
    """The scan as a prefetching ``tf.data.Dataset`` of dicts (see the module docstring)."""
    tf = _tf()
    spec = element_spec(scan)
    scan.plan()  # footers and file lists once, here, not in tf.data's generator thread
    epochs = itertools.count(scan.epoch)
    types = {n: scan.arrow_schema.field(n).type for n in spec}
    ragged = {n for n, s in spec.items() if isinstance(s, tf.RaggedTensorSpec)}

    arrays = {n: s.shape[1] for n, s in spec.items() if _plain(scan, n) and numeric_list(types[n])}

    def convert(table: pa.Table) -> dict[str, Any]:
        decoded = scan.dataset.decode(table.drop_columns([n for n in arrays if n in table.column_names]))
        for n, width in arrays.items():
            column = table.column(n)
            decoded[n] = rows(column) if width is None else fixed(n, scan.dataset.name, column, width)
        return {n: decoded[n] if n in ragged else _numpy(decoded[n], types[n]) for n in spec}

    def generate() -> Iterator[dict[str, Any]]:
        epoch_scan = scan.set_epoch(next(epochs))
        for chunk in epoch_scan.iter_chunks(convert=convert):
            yield {n: _ragged(v, spec[n]) if n in ragged else v for n, v in chunk.items()}

    data = tf.data.Dataset.from_generator(generate, output_signature=spec).rebatch(batch_size)
    return data.prefetch(prefetch if prefetch is not None else tf.data.AUTOTUNE)
