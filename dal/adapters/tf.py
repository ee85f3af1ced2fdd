"""TensorFlow: a scan as a ``tf.data.Dataset`` with a full ``element_spec``, ready for ``model.fit``.

    data = dal.open("weather.radar", "prod").select("image", "label").shard(hvd.rank(), hvd.size()).to_tf(64)
    data.element_spec   # {'image': TensorSpec((None, 64, 64, 3), tf.uint8), 'label': TensorSpec((None,), tf.int64)}
    model.fit(data.map(lambda d: (d["image"], d["label"])), epochs=3)

Each pass over the dataset (each Keras epoch) reads the scan's next epoch, so shuffled scans reshuffle.
Ranks come from ``Scan.shard`` (Horovod: ``hvd.rank()``, ``hvd.size()``); every rank yields the same
number of batches. Fixed-shape tensor fields keep their shape; variable-shape ones are refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.errors import DalError, require

if TYPE_CHECKING:
    from dal.scan import Scan


def _tf() -> Any:
    return require("tensorflow", "tf")


def element_spec(scan: Scan) -> dict[str, Any]:
    """The TensorSpec of every column the scan yields, batched (leading dimension None)."""
    tf = _tf()
    names = list(scan.columns) if scan.columns is not None else scan.arrow_schema.names
    spec: dict[str, Any] = {}
    for name in names:
        field = scan.dataset.schema.get(name)
        typ = scan.arrow_schema.field(name).type
        if field is not None and field.codec not in (None, "scalar"):
            shape = tuple(field.shape or ())
            if any(d is None for d in shape):
                raise DalError(
                    f"field {name!r} has a variable shape {shape}: to_tf needs fixed shapes (select other fields)"
                )
            spec[name] = tf.TensorSpec((None, *shape), tf.as_dtype(np.dtype(field.dtype)), name=name)
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            spec[name] = tf.TensorSpec((None,), tf.string, name=name)
        elif pa.types.is_timestamp(typ) or pa.types.is_date(typ):
            spec[name] = tf.TensorSpec((None,), tf.int64, name=name)  # microseconds / days since the epoch
        elif pa.types.is_boolean(typ) or pa.types.is_integer(typ) or pa.types.is_floating(typ):
            spec[name] = tf.TensorSpec((None,), tf.as_dtype(typ.to_pandas_dtype()), name=name)
        else:
            raise DalError(f"column {name!r} of type {typ} has no TensorFlow form: select other columns")
    return spec


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


def to_tf(scan: Scan, batch_size: int = 256, *, prefetch: int | None = None) -> Any:
    """The scan as a prefetching ``tf.data.Dataset`` of dicts (see the module docstring)."""
    tf = _tf()
    spec = element_spec(scan)
    scan.plan()  # footers and file lists once, here, not in tf.data's generator thread
    epochs = itertools.count(scan.epoch)

    def generate() -> Iterator[dict[str, Any]]:
        epoch_scan = scan.set_epoch(next(epochs))
        for batch in epoch_scan.iter_batches(batch_size):
            table = pa.Table.from_batches([batch])
            decoded = scan.dataset.decode(table)
            yield {n: _numpy(decoded[n], scan.arrow_schema.field(n).type) for n in spec}

    data = tf.data.Dataset.from_generator(generate, output_signature=spec)
    return data.prefetch(prefetch if prefetch is not None else tf.data.AUTOTUNE)
