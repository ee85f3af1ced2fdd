"""TensorFlow: a scan as a ``tf.data.Dataset`` with a full ``element_spec``, ready for ``model.fit``.

    data = dal.open("weather.radar", "prod").select("image", "label").shard(hvd.rank(), hvd.size()).to_tf(64)
    data.element_spec   # {'image': TensorSpec((None, 64, 64, 3), tf.uint8), 'label': TensorSpec((None,), tf.int64)}
    model.fit(data.map(lambda d: (d["image"], d["label"])), epochs=3)

Built on the same chunk pipeline as ``to_torch``: a generator of whole chunks (read, decoded and
converted once on reader threads) with a fixed ``output_signature``, cut into batches by tf.data's
``rebatch`` (native code, no Python per batch). Each pass over the dataset (each Keras epoch) reads the
scan's next epoch, so shuffled scans reshuffle. Ranks come from ``Scan.shard`` (Horovod: ``hvd.rank()``,
``hvd.size()``); every rank yields the same number of batches. Fixed-shape tensor fields keep their
shape; variable-shape ones (a ``None`` in their shape) become ``tf.RaggedTensor``s. The dataset knows its
cardinality (``len(data)``, Keras' steps per epoch): the rank's rows counted from the plan (the filter columns
read when filtered, as ``to_torch``'s ``len``), in batches. It stays unknown where no count holds for every
epoch: a sample (its size varies around fraction·N), a balance or a mix, and a plain-function transform (it may
return other rows than it was given); Keras then finds the end of each epoch by running into it.

``to_tf(64, transform=dal.TransformSpec(fn, edit_fields=...))`` runs ``fn`` on each decoded chunk (see
``dal.read.transform``, the same as ``to_torch``); the element_spec is built from the declared fields, and the
transform is tried on the first rows when the dataset is made, so a wrong output is a DalError there.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dal.adapters.arrays import (
    check_footers,
    check_nulls,
    fixed,
    fixed_shape,
    no_null_value,
    nulls_error,
    numeric_list,
    rows,
)
from dal.adapters.arrays import widths as array_widths
from dal.errors import DalError, check_int, require

if TYPE_CHECKING:
    from dal.read.source import Source


def _tf() -> Any:
    return require("tensorflow", "tf")


def element_spec(scan: Source) -> dict[str, Any]:
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
            spec[name] = _tensor_spec(name, np.dtype(field.dtype), tuple(field.shape or ()))
        elif name in widths:  # numeric arrays: one length in the data -> (None, n), else ragged
            shape = fixed_shape(typ)
            element = typ.value_type
            while pa.types.is_fixed_size_list(element):
                element = element.value_type
            dtype = tf.as_dtype(element.to_pandas_dtype())
            width = widths[name]
            if shape is not None:  # a fixed-shape tensor: (None, *shape)
                spec[name] = tf.TensorSpec((None, *shape), dtype, name=name)
            elif width is None:
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


def _tensor_spec(name: str, dtype: np.dtype[Any], shape: tuple[int | None, ...]) -> Any:
    """The batched TensorSpec of a column of ``shape`` per row; RaggedTensorSpec when a dimension varies."""
    tf = _tf()
    full = (None, *shape)
    if any(d is None for d in shape):
        ragged_rank = max(i for i, d in enumerate(full) if d is None)
        return tf.RaggedTensorSpec(full, tf.as_dtype(dtype), ragged_rank=ragged_rank, row_splits_dtype=tf.int64)
    return tf.TensorSpec(full, tf.as_dtype(dtype), name=name)


_DAYS = np.dtype("datetime64[D]")


def _no_null_form(typ: pa.DataType) -> bool:
    """Whether a column of ``typ`` has no TensorFlow value for a null (strings too: floats have NaN)."""
    return no_null_value(typ) or pa.types.is_string(typ) or pa.types.is_large_string(typ)


def _nulls(scan: Source, name: str) -> DalError:
    return nulls_error(scan.dataset.name, name, "TensorFlow")


def _plain(scan: Source, name: str) -> bool:
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
    empty = np.zeros([0 if d is None else d for d in spec.shape.as_list()[1:]], dtype)  # a null: an empty row
    arrays = [empty if v is None else np.asarray(v, dtype) for v in values]
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


def to_tf(
    scan: Source,
    batch_size: int = 256,
    *,
    prefetch: int | None = None,
    transform: Any = None,
    output_schema: pa.Schema | None = None,
) -> Any:
    """The scan as a prefetching ``tf.data.Dataset`` of dicts (see the module docstring).

    ``transform``: a ``dal.TransformSpec`` (or a function over Arrow chunks with its ``output_schema``), as
    for ``to_torch`` (see ``dal.read.transform``); the element_spec comes from the fields it declares, and the
    transform is tried on the first rows here, so a wrong shape or dtype is a DalError before training.

    Raises:
        DalError: a column with no TensorFlow form; a transform that does not fit the data."""
    tf = _tf()
    batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=2**31 - 1)
    if transform is not None or output_schema is not None:
        return _transformed(scan, batch_size, prefetch, transform, output_schema)
    spec = element_spec(scan)
    scan.plan()  # footers and file lists once, here, not in tf.data's generator thread
    types = {n: scan.arrow_schema.field(n).type for n in spec}
    ragged = {n for n, s in spec.items() if isinstance(s, tf.RaggedTensorSpec)}

    arrays = {n: s.shape[1] for n, s in spec.items() if _plain(scan, n) and numeric_list(types[n])}

    nullless = [n for n in spec if _plain(scan, n) and _no_null_form(types[n])]
    # before the first batch (footer statistics): a null raised in tf.data's generator reaches the caller
    # as tf.errors.UnknownError mid-epoch, not as a DalError
    check_nulls(scan, dict.fromkeys(nullless, "TensorFlow"))

    def convert(table: pa.Table) -> dict[str, Any]:
        for n in nullless:
            if table.column(n).null_count:
                raise _nulls(scan, n)
        decoded = scan.dataset.decode(table.drop_columns([n for n in arrays if n in table.column_names]))
        for n, width in arrays.items():
            column = table.column(n)
            decoded[n] = rows(column) if width is None else fixed(n, scan.dataset.name, column, width)
        return {n: decoded[n] if n in ragged else _numpy(decoded[n], types[n]) for n in spec}

    return _dataset(scan, spec, convert, batch_size, prefetch, _rows(scan))


def _dataset(
    scan: Source,
    spec: dict[str, Any],
    convert: Callable[[pa.Table], dict[str, Any]],
    batch_size: int,
    prefetch: int | None,
    rows: int | None,
) -> Any:
    """A generator of converted chunks with a fixed signature, rebatched by tf.data; each pass is the next epoch.

    ``rows``: the rows of each of the rank's epochs when they are known before reading (``_rows``): the dataset
    then has its cardinality, ``ceil(rows / batch_size)`` batches (Keras
    knows the steps of an epoch instead of running into the end of the data and warning "Your input ran out of
    data" every epoch). None: unknown (see the module docstring); so is the cardinality."""
    tf = _tf()
    epochs = itertools.count(scan.epoch)
    ragged = {n for n, s in spec.items() if isinstance(s, tf.RaggedTensorSpec)}

    def generate() -> Iterator[dict[str, Any]]:
        epoch_scan = scan.with_epoch(next(epochs))
        for chunk in epoch_scan.iter_chunks(convert=convert):
            yield {n: _ragged(v, spec[n]) if n in ragged else v for n, v in chunk.items()}

    data = tf.data.Dataset.from_generator(generate, output_signature=spec).rebatch(batch_size)
    if rows is not None:  # exact: a pass yielding another number of batches fails loudly, never silently
        data = data.apply(tf.data.experimental.assert_cardinality(-(-rows // batch_size)))
    return data.prefetch(prefetch if prefetch is not None else tf.data.AUTOTUNE)


def _transformed(scan: Source, batch_size: int, prefetch: int | None, transform: Any, output_schema: Any) -> Any:
    """``to_tf`` through a transform (``dal.read.transform``): its declared fields make the element_spec."""
    from dal.read import reader

    tf = _tf()
    bound = _bind(scan, transform, output_schema)
    spec = {f.name: _field_spec(f) for f in bound.fields}
    scan.plan()
    ragged = {n for n, s in spec.items() if isinstance(s, tf.RaggedTensorSpec)}
    fields = {f.name: f for f in bound.fields}

    def convert(table: pa.Table) -> dict[str, Any]:
        _rows, columns = bound.apply(table)
        return {name: values if name in ragged else _tf_values(scan, fields[name], values)
                for name, values in columns.items()}  # fmt: skip

    for task in scan.plan()[:8]:  # the first rows through the transform now: its errors as DalErrors, here
        table = reader.read_task(scan.query, task)
        if table.num_rows:
            convert(table.slice(0, 64))
            break
    # a TransformSpec keeps the rows of each chunk; a plain function over Arrow chunks may return other rows
    from dal.read.transform import TransformSpec

    return _dataset(
        scan, spec, convert, batch_size, prefetch, _rows(scan) if isinstance(transform, TransformSpec) else None
    )


def _rows(scan: Source) -> int | None:
    """The rows of each of the rank's epochs, counted from the plan (the filter columns read when filtered, as
    ``to_torch``'s ``len``); None where epochs differ (a sample, a balance, a mix)."""
    return scan.rank_rows() if scan.SAME_ROWS_EACH_EPOCH else None


def _bind(scan: Source, transform: Any, output_schema: Any) -> Any:
    """The transform bound to the scan, numeric arrays of one width in the data given their width (as without a
    transform), the nulls of columns passed through as stored checked from the footers.

    Raises:
        TransformError: ``output_schema`` without a transform, or a transform that does not fit the scan.
    """
    from dal.read import transform as transforms

    if transform is None:
        raise transforms.TransformError("output_schema goes with transform=; pass the transform too")
    bound = transforms.bind(transform, output_schema, scan)
    # numeric arrays passed on unchanged: one width in the data -> (None, n), as without a transform
    inputs = {f.name: f for f in bound.inputs}
    kept = [
        f.name
        for f in bound.fields
        if inputs.get(f.name) == f and f.shape == (None,) and _plain(scan, f.name)
        and numeric_list(scan.arrow_schema.field(f.name).type)
    ]  # fmt: skip
    widths = array_widths(scan, kept) if kept else {}
    check_footers(scan, widths)
    shapes = {n: (w,) for n, w in widths.items() if w is not None}
    if shapes:
        bound = transforms.bind(transform, output_schema, scan, shapes)
    if isinstance(transform, transforms.TransformSpec) and transform.func is None:
        # only a schema edit: the columns pass through as stored, so their nulls are known from the footers
        # (a function may replace nulls: what it returns is checked chunk by chunk)
        given = {f.name: f for f in bound.inputs}
        passed = [f.name for f in bound.fields if given.get(f.name) == f and _plain(scan, f.name)]
        check_nulls(scan, {n: "TensorFlow" for n in passed if _no_null_form(scan.arrow_schema.field(n).type)})
    return bound


def _field_spec(f: Any) -> Any:
    """The TensorSpec of a transform's output field.

    Raises:
        DalError: a field of Python objects (no TensorFlow form).
    """
    tf = _tf()
    if f.kind == "str":
        return tf.TensorSpec((None,), tf.string, name=f.name)
    if f.kind == "time":
        return tf.TensorSpec((None,), tf.int64, name=f.name)  # microseconds / days since the epoch
    if f.kind == "object":
        raise DalError(f"column {f.name!r} ({f.dtype}) has no TensorFlow form: remove it or declare it in edit_fields")
    return _tensor_spec(f.name, f.dtype, f.shape)


def _tf_values(scan: Source, f: Any, values: Any) -> Any:
    """A transform's output column as its (fixed-shape) TensorSpec takes it.

    Raises:
        DalError: a null in it (TensorFlow has no null), naming the column.
    """
    if isinstance(values, list):  # one value per row: a null among them (shapes are fixed here)
        raise _nulls(scan, f.name)
    if f.kind == "str":  # an object array of str (or bytes): tf.string takes both as they are
        values = np.asarray(values, dtype=object)
        if any(v is None for v in values):
            raise _nulls(scan, f.name)
        return values
    if f.kind == "time":  # microseconds since the epoch (days for dates), as without a transform
        values = np.asarray(values)
        if np.isnat(values).any():
            raise _nulls(scan, f.name)
        return values.astype("datetime64[D]" if f.dtype == _DAYS else "datetime64[us]").astype(np.int64)
    if values.dtype != f.dtype and values.dtype.kind == "f" and f.dtype.kind in "biu":
        raise _nulls(scan, f.name)  # an integer column with nulls arrives as floats with NaN
    return values
