"""Codecs for tensor fields, compatible with Petastorm's: scalar, ndarray (.npy bytes), compressed ndarray
(.npz with one ``arr``), and compressed image (png / jpeg through OpenCV, RGB in memory, BGR on disk as
OpenCV writes it — the channel order Petastorm uses).

Each codec encodes a column of Python/NumPy values into an Arrow array and decodes an Arrow array into a
NumPy array per batch. Decoding ndarray cells of one fixed shape is a single vectorised view of the Arrow
buffer; formats that must be inflated (npz, png, jpeg) decode cell by cell, then stack once.
"""

from __future__ import annotations

import io
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from dal.errors import DalError, FormatError, SchemaMismatch, require

_ARROW_OF_NUMPY = {
    "int8": pa.int8(), "uint8": pa.uint8(), "int16": pa.int16(), "uint16": pa.uint16(), "int32": pa.int32(),
    "uint32": pa.uint32(), "int64": pa.int64(), "uint64": pa.uint64(), "float16": pa.float16(),
    "float32": pa.float32(), "float64": pa.float64(), "bool": pa.bool_(), "str": pa.string(), "bytes": pa.binary(),
}  # fmt: skip


def dtype_name(dtype: Any) -> str:
    """A canonical dtype name: numpy's name, with 'str' and 'bytes' for the variable-length kinds and
    'decimal' for Python's ``Decimal`` (petastorm's dtype for decimal columns)."""
    if dtype is Decimal or (isinstance(dtype, str) and dtype == "decimal"):
        return "decimal"
    d = np.dtype(dtype)
    if d.kind == "U":
        return "str"
    if d.kind == "S":
        return "bytes"
    return str(d.name)


_DECIMAL_TYPE = re.compile(r"decimal(?:128|256)?\((\d+), *(-?\d+)\)")
_TIMESTAMP_TZ = re.compile(r"timestamp\[(s|ms|us|ns), *tz=(.+)\]")


def arrow_type(spec: str) -> pa.DataType:
    """The scalar Arrow type a catalog type string names (``str(pa.DataType)``).

    Raises:
        SchemaMismatch: not a scalar Arrow type.
    """
    if m := _DECIMAL_TYPE.fullmatch(spec):
        precision, scale = int(m.group(1)), int(m.group(2))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if m := _TIMESTAMP_TZ.fullmatch(spec):
        return pa.timestamp(m.group(1), tz=m.group(2))
    try:
        return pa.type_for_alias(spec)
    except (ValueError, KeyError) as e:
        raise SchemaMismatch(f"{spec!r} is not a scalar Arrow type") from e


def default_storage(dtype: str) -> pa.DataType | None:
    """The Arrow type a scalar of ``dtype`` is stored as when its codec names none (None: it must name one)."""
    if dtype in _ARROW_OF_NUMPY:
        return _ARROW_OF_NUMPY[dtype]
    if dtype == "datetime64[D]":
        return pa.date32()
    if m := re.fullmatch(r"datetime64\[(s|ms|us|ns)\]", dtype):
        return pa.timestamp(m.group(1))
    return None


def shape_matches(actual: tuple[int, ...], expected: tuple[int | None, ...]) -> bool:
    """True when ``actual`` fits ``expected`` (``None`` dimensions match any size)."""
    return len(actual) == len(expected) and all(e is None or a == e for a, e in zip(actual, expected, strict=True))


class Codec(ABC):
    """Encodes one field's values into Arrow storage and decodes them back per batch."""

    spec: ClassVar[str]

    @abstractmethod
    def storage_type(self, dtype: str) -> pa.DataType:
        """The Arrow type the encoded values are stored as."""

    @abstractmethod
    def encode(self, name: str, dtype: str, shape: tuple[int | None, ...], values: Sequence[Any]) -> pa.Array:
        """Encode a column; raises ``SchemaMismatch`` naming the field and the row for a bad value."""

    @abstractmethod
    def decode(self, dtype: str, shape: tuple[int | None, ...], array: pa.Array) -> Any:
        """Decode a column into a NumPy array (stacked when every cell has one shape) or a list of arrays."""

    def describe(self) -> str:
        return self.spec

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(vars(self).items()))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class ScalarCodec(Codec):
    """Plain Parquet scalars of the field's dtype.

    ``storage`` names the Arrow type the values are stored as when it is not the dtype's own (as Petastorm's
    ``ScalarCodec(spark_type)`` does: ``uint8`` in a ``ShortType`` column is stored as int16, a ``Decimal``
    field as ``decimal128(p, s)``, ``np.datetime64`` as a date or a timestamp). Decoding gives what
    petastorm's ``make_reader`` gives, as one NumPy column: values of the field's dtype; ``Decimal``
    objects; ``datetime64[us]`` for timestamps and ``datetime64[D]`` for dates; NaN for a null float and,
    for any other null, ``None`` in an object array whose other cells are scalars of the dtype.
    """

    spec = "scalar"

    def __init__(self, storage: pa.DataType | str | None = None) -> None:
        self.storage = None if storage is None else str(arrow_type(str(storage)))

    def storage_type(self, dtype: str) -> pa.DataType:
        if self.storage is not None:
            return arrow_type(self.storage)
        typ = default_storage(dtype)
        if typ is None:
            hint = (
                "e.g. ScalarCodec(pa.decimal128(10, 2))"
                if dtype == "decimal"
                else "e.g. ScalarCodec(pa.timestamp('us')) or ScalarCodec(pa.date32())"
                if dtype.startswith("datetime64")
                else "give ScalarCodec an Arrow storage type"
            )
            raise SchemaMismatch(f"dtype {dtype} has no default scalar storage type: {hint}")
        return typ

    def encode(self, name: str, dtype: str, shape: tuple[int | None, ...], values: Sequence[Any]) -> pa.Array:
        try:
            storage = self.storage_type(dtype)
        except SchemaMismatch as e:
            raise SchemaMismatch(f"field {name!r}: {e}") from None
        # pandas' missing values (None, NaT, pd.NA) are nulls; a float NaN is a value and stays NaN (Spark, Delta
        # and petastorm keep it: from_pandas=True would store it as null)
        values = [None if _missing(v) else v for v in values]
        try:
            return pa.array(values, type=storage, from_pandas=False)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            bad = next((i for i, v in enumerate(values) if not _scalar_fits(v, self.storage_type(dtype))), None)
            raise SchemaMismatch(
                f"field {name!r}, row {bad}: {values[bad] if bad is not None else '?'!r} is not {dtype}"
            ) from e

    def decode(self, dtype: str, shape: tuple[int | None, ...], array: pa.Array) -> Any:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        typ = array.type
        if pa.types.is_dictionary(typ):
            array = array.cast(typ.value_type)
            typ = array.type
        target = _decoded_dtype(dtype, typ)
        if target is None:  # strings, bytes, Decimal: object arrays, None for a null
            return array.to_numpy(zero_copy_only=False)
        if array.null_count == 0 or target.kind in "fc":  # floats: NaN for a null, as petastorm
            return np.asarray(array.to_numpy(zero_copy_only=False)).astype(target, copy=False)
        out = np.empty(len(array), dtype=object)
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        out[valid] = list(np.asarray(array.drop_null().to_numpy(zero_copy_only=False)).astype(target, copy=False))
        return out


def _missing(value: Any) -> bool:
    """pandas' and NumPy's not-a-value markers other than a float NaN: NaT, ``pd.NA``."""
    if value is None or isinstance(value, float | np.floating):
        return False
    if isinstance(value, np.datetime64 | np.timedelta64):
        return bool(np.isnat(value))
    return type(value).__name__ in ("NaTType", "NAType")


def _decoded_dtype(dtype: str, storage: pa.DataType) -> np.dtype[Any] | None:
    """The NumPy dtype a scalar column decodes to, or None for object columns (str, bytes, Decimal)."""
    if dtype in ("str", "bytes", "decimal", "object") or pa.types.is_decimal(storage):
        return None
    if pa.types.is_string(storage) or pa.types.is_large_string(storage) or pa.types.is_binary(storage):
        return None
    if dtype == "datetime64":  # petastorm: np.datetime64(value) of a date is [D], of a timestamp [us]
        return np.dtype("datetime64[D]") if pa.types.is_date(storage) else np.dtype("datetime64[us]")
    return np.dtype(dtype)


def _scalar_fits(value: Any, typ: pa.DataType) -> bool:
    try:
        pa.array([value], type=typ)
        return True
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return False


class _ArrayCodec(Codec):
    """Shared validation of ndarray-like cells."""

    def storage_type(self, dtype: str) -> pa.DataType:
        return pa.binary()

    def _check(self, name: str, dtype: str, shape: tuple[int | None, ...], row: int, value: Any) -> np.ndarray | None:
        if value is None:
            return None
        if not isinstance(value, np.ndarray):
            raise SchemaMismatch(
                f"field {name!r}, row {row}: expected a numpy array of {dtype}, got {type(value).__name__}"
            )
        if dtype_name(value.dtype) != dtype:
            raise SchemaMismatch(f"field {name!r}, row {row}: expected dtype {dtype}, got {value.dtype}")
        if not shape_matches(value.shape, shape):
            raise SchemaMismatch(f"field {name!r}, row {row}: expected shape {shape}, got {value.shape}")
        return value

    def encode(self, name: str, dtype: str, shape: tuple[int | None, ...], values: Sequence[Any]) -> pa.Array:
        out = []
        for row, v in enumerate(values):
            arr = self._check(name, dtype, shape, row, v)
            out.append(None if arr is None else self._encode_one(arr))
        return pa.array(out, type=pa.binary())

    @abstractmethod
    def _encode_one(self, arr: np.ndarray) -> bytes: ...

    @abstractmethod
    def _decode_one(self, data: bytes) -> np.ndarray: ...

    def decode(self, dtype: str, shape: tuple[int | None, ...], array: pa.Array) -> Any:
        if len(array) == 0:
            return _empty(dtype, shape)
        return _stack(self._decode_cells(array))

    def _decode_cells(self, array: pa.Array) -> list[np.ndarray | None]:
        cells: list[np.ndarray | None] = []
        # the encoded cells become Python bytes a slice at a time, not a whole chunk's worth at once
        pieces = ((start, array.slice(start, DECODE_SLICE).to_pylist()) for start in range(0, len(array), DECODE_SLICE))
        for row, b in ((start + i, b) for start, piece in pieces for i, b in enumerate(piece)):
            try:
                cells.append(None if b is None else self._decode_one(b))
            except DalError:  # a missing extra (OpenCV) says so itself
                raise
            except Exception as e:  # numpy, zipfile and OpenCV raise many types on damaged bytes
                raise FormatError(f"row {row}: not a valid {self.describe()} cell ({type(e).__name__}: {e})") from e
        return cells


DECODE_SLICE = 256  # cells of a chunk held as Python bytes at once while decoding


def _empty(dtype: str, shape: tuple[int | None, ...]) -> Any:
    """An empty batch keeps its (rows, *shape) form when the shape is fully known."""
    if all(d is not None for d in shape) and dtype != "decimal":
        return np.empty((0, *shape), dtype=np.dtype(dtype))  # type: ignore[arg-type]
    return []


def _stack(cells: list[np.ndarray | None]) -> Any:
    """One (rows, *shape) array when every cell has one shape and one dtype, else the cells as they are
    (stacking would widen, e.g., ``|S9`` and ``|S10`` string cells to one itemsize: not what was written)."""
    if cells and all(c is not None for c in cells) and len({(c.shape, c.dtype) for c in cells if c is not None}) == 1:
        return np.stack(cells)  # type: ignore[arg-type]
    return cells


class NdarrayCodec(_ArrayCodec):
    """NumPy ``.npy`` bytes (``np.save``), as Petastorm's NdarrayCodec."""

    spec = "ndarray"

    def _encode_one(self, arr: np.ndarray) -> bytes:
        buf = io.BytesIO()
        np.save(buf, arr)
        return buf.getvalue()

    def _decode_one(self, data: bytes) -> np.ndarray:
        return np.asarray(np.load(io.BytesIO(data), allow_pickle=False))

    def decode(self, dtype: str, shape: tuple[int | None, ...], array: pa.Array) -> Any:
        if len(array) == 0:
            return _empty(dtype, shape)
        try:
            fast = _decode_npy_batch(array)
        except ValueError:  # a damaged cell: decoding cell by cell names it
            fast = None
        return fast if fast is not None else super().decode(dtype, shape, array)


def _cells(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary (or large_binary) array's cells as NumPy views, no copy: ``(offsets, data)``, cell i being
    ``data[offsets[i]:offsets[i + 1]]`` (``len(array) + 1`` int64 offsets, slicing honoured)."""
    width = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    _, offsets, data = array.buffers()
    ends = np.frombuffer(offsets, dtype=width)[array.offset : array.offset + len(array) + 1].astype(np.int64)
    return ends, (np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8))


def _decode_npy_batch(array: pa.Array) -> np.ndarray | None:
    """All cells the same length with one header (fixed shape, dtype, order): one strided view, no loop."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    n = len(array)
    if n == 0 or array.null_count:
        return None
    offsets, data = _cells(array)
    lengths = np.diff(offsets)
    if (lengths != lengths[0]).any():
        return None
    cell = int(lengths[0])
    rows = data[offsets[0] : offsets[0] + n * cell].reshape(n, cell)
    parsed = _npy_header(rows[0])
    if parsed is None:
        return None
    header, shape, fortran, dtype = parsed
    if fortran or dtype.hasobject or header > cell or not _same_headers(data, int(offsets[0]), n, cell, header):
        return None
    body = np.ascontiguousarray(rows[:, header:])
    return np.asarray(body.view(dtype).reshape((n, *shape)))


_NPY_HEADERS: dict[bytes, tuple[int, tuple[int, ...], bool, np.dtype[Any]]] = {}


def _npy_header(cell: np.ndarray) -> tuple[int, tuple[int, ...], bool, np.dtype[Any]] | None:
    """``(header length, shape, fortran order, dtype)`` of a ``.npy`` cell (None: not version 1 or 2), parsed
    once per distinct header: numpy parses one with ``ast.literal_eval`` (~0.1 ms, a chunk's decoding of
    hundreds of rows). Raises ValueError on a damaged header (as ``np.load``)."""
    prefix = cell[:12].tobytes()  # magic (6), version (2), header length (2 or 4)
    if len(prefix) < 10 or prefix[:6] != b"\x93NUMPY" or prefix[6] not in (1, 2):
        return None
    size = (
        10 + int.from_bytes(prefix[8:10], "little") if prefix[6] == 1 else 12 + int.from_bytes(prefix[8:12], "little")
    )
    key = cell[:size].tobytes()
    parsed = _NPY_HEADERS.get(key)
    if parsed is None:  # reader threads parse at once: each keeps its own result (a clear cannot take it away)
        stream = io.BytesIO(key)
        major, _minor = np.lib.format.read_magic(stream)
        read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(stream)
        parsed = (stream.tell(), tuple(shape), bool(fortran), dtype)
        if len(_NPY_HEADERS) >= 64:  # columns of many shapes: bounded
            _NPY_HEADERS.clear()
        _NPY_HEADERS[key] = parsed
    return parsed


def _same_headers(data: np.ndarray, start: int, n: int, cell: int, header: int) -> bool:
    """Whether the ``n`` cells of ``cell`` bytes from ``data[start]`` all begin with the first one's ``header``
    bytes, compared as the widest unsigned ints that divide the cell and header lengths and the start (np.save
    pads a header to 16 or 64 bytes: 8-byte words, an eighth of the comparisons of byte by byte)."""
    width = next(w for w in (8, 4, 2, 1) if not (cell % w or header % w or start % w))
    words = data[start : start + n * cell].view(f"<u{width}").reshape(n, cell // width)[:, : header // width]
    return bool((words == words[0]).all())


class CompressedNdarrayCodec(_ArrayCodec):
    """``np.savez_compressed(arr=...)`` bytes, as Petastorm's CompressedNdarrayCodec."""

    spec = "compressed_ndarray"

    def _encode_one(self, arr: np.ndarray) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, arr=arr)
        return buf.getvalue()

    def _decode_one(self, data: bytes) -> np.ndarray:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return np.asarray(npz["arr"])


class ImageCodec(_ArrayCodec):
    """Images through OpenCV (png, jpeg with a quality, and the other formats petastorm's
    CompressedImageCodec accepts: bmp, tiff, webp, ppm); arrays are RGB (H, W, 3) or greyscale (H, W)."""

    spec = "image"
    FORMATS: ClassVar[dict[str, str]] = {
        "png": "png", "jpeg": "jpeg", "jpg": "jpeg", "bmp": "bmp", "tiff": "tiff", "tif": "tiff", "webp": "webp",
        "ppm": "ppm",
    }  # fmt: skip

    def __init__(self, format: str = "png", quality: int = 80) -> None:
        if format not in self.FORMATS:
            raise ValueError(f"image format must be one of {', '.join(sorted(set(self.FORMATS)))}, not {format!r}")
        self.format = self.FORMATS[format]
        self.quality = int(quality)

    def describe(self) -> str:
        return f"image/{self.format}" + (f";quality={self.quality}" if self.format == "jpeg" else "")

    def _check(self, name: str, dtype: str, shape: tuple[int | None, ...], row: int, value: Any) -> np.ndarray | None:
        arr = super()._check(name, dtype, shape, row, value)
        if arr is not None and not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
            raise SchemaMismatch(f"field {name!r}, row {row}: images are (H, W) or (H, W, 3), got {arr.shape}")
        return arr

    def _encode_one(self, arr: np.ndarray) -> bytes:
        cv2 = require("cv2", "images")
        bgr = arr[:, :, ::-1] if arr.ndim == 3 else arr  # OpenCV stores BGR
        params = [int(cv2.IMWRITE_JPEG_QUALITY), self.quality] if self.format == "jpeg" else []
        ok, buf = cv2.imencode("." + self.format, np.ascontiguousarray(bgr), params)
        if not ok:
            raise SchemaMismatch(f"OpenCV could not encode a {arr.dtype} {arr.shape} image as {self.format}")
        return bytes(buf)

    def _decode_into(self, dtype: str, shape: tuple[int | None, ...], array: pa.Array) -> np.ndarray | None:
        """The common case in one pass: no null cell, a fixed (H, W) or (H, W, 3) shape, each image decoded
        from a view of the Arrow buffer (no Python bytes per cell) straight into its row of one (rows, *shape)
        array (no stacking copy). None where any cell decodes to another shape or dtype, or not at all: the
        cell-by-cell path then gives what it always gave (a list of arrays, or the error naming the row)."""
        dims = tuple(d for d in shape if d is not None)
        if (
            array.null_count
            or len(dims) != len(shape)
            or not (len(dims) == 2 or (len(dims) == 3 and dims[2] == 3))
            or not (pa.types.is_large_binary(array.type) or pa.types.is_binary(array.type))
        ):
            return None
        cv2 = require("cv2", "images")
        ends, data = _cells(array)
        try:
            out = np.empty((len(array), *dims), np.dtype(dtype))  # type: ignore[arg-type]
            return out if _decode_into_rows(cv2, data, ends.tolist(), out) else None
        except Exception:  # OpenCV raises on empty or damaged bytes: the cell-by-cell path names the row
            return None

    def _decode_one(self, data: bytes) -> np.ndarray:
        cv2 = require("cv2", "images")
        image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
        if image is None or not (image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)):
            raise ValueError("OpenCV could not decode an (H, W) or (H, W, 3) image")
        return np.asarray(image[:, :, ::-1] if image.ndim == 3 else image)  # OpenCV gives BGR: an RGB view

    def decode(self, dtype: str, shape: tuple[int | None, ...], array: pa.Array) -> Any:
        if len(array) == 0:
            return _empty(dtype, shape)
        into = self._decode_into(dtype, shape, array)
        if into is not None:
            return into
        stacked = _stack(self._decode_cells(array))  # np.stack copies the views into one contiguous batch
        if isinstance(stacked, np.ndarray):
            return stacked
        return [None if c is None else np.ascontiguousarray(c) for c in stacked]


def _decode_into_rows(cv2: Any, data: np.ndarray, offsets: list[int], out: np.ndarray) -> bool:
    """Each image of ``data[offsets[i]:offsets[i + 1]]`` decoded into ``out[i]`` (RGB order); False at the
    first one that does not decode to ``out``'s row shape and dtype."""
    for i in range(len(out)):
        image = cv2.imdecode(data[offsets[i] : offsets[i + 1]], cv2.IMREAD_UNCHANGED)
        if image is None or image.shape != out.shape[1:] or image.dtype != out.dtype:
            return False
        if image.ndim == 3:
            cv2.cvtColor(image, cv2.COLOR_BGR2RGB, dst=out[i])  # OpenCV gives BGR
        else:
            out[i] = image
    return True


def codec_from_spec(spec: str | None, storage: str | None = None) -> Codec | None:
    """The codec a catalog field's ``codec`` string names (as written by ``Codec.describe``); a scalar
    codec keeps the field's Arrow ``storage`` type string."""
    if spec is None:
        return None
    if spec == "scalar":
        return ScalarCodec(storage)
    if spec == "ndarray":
        return NdarrayCodec()
    if spec == "compressed_ndarray":
        return CompressedNdarrayCodec()
    if spec.startswith("image/"):
        fmt, _, rest = spec[len("image/") :].partition(";")
        quality = int(rest.split("=", 1)[1]) if rest.startswith("quality=") else 80
        return ImageCodec(fmt, quality)
    raise SchemaMismatch(f"unknown codec {spec!r}")
