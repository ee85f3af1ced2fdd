"""Each codec on its own: round trips, Petastorm's on-disk conventions, vectorised decoding, bad values."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dal.errors import FormatError, SchemaMismatch
from dal.tensors.codecs import (
    CompressedNdarrayCodec,
    ImageCodec,
    NdarrayCodec,
    ScalarCodec,
    arrow_type,
    codec_from_spec,
)

DTYPES = ["int8", "uint8", "int16", "int32", "int64", "float32", "float64"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(1, 6), st.integers(1, 4), st.integers(1, 5))
def test_ndarray_round_trip_fixed_shape_is_vectorised(dtype: str, rows: int, a: int, b: int) -> None:
    arrays = [np.arange(a * b, dtype=dtype).reshape(a, b) + i for i in range(rows)]
    encoded = NdarrayCodec().encode("f", dtype, (a, b), arrays)
    assert encoded.type == pa.binary()
    # petastorm's NdarrayCodec bytes are np.save output
    assert np.array_equal(np.load(io.BytesIO(encoded[0].as_py())), arrays[0])
    decoded = NdarrayCodec().decode(dtype, (a, b), encoded)
    assert isinstance(decoded, np.ndarray) and decoded.shape == (rows, a, b) and decoded.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(decoded, np.stack(arrays))
    # the strided batch path gives exactly what decoding cell by cell gives, also on a sliced array
    sliced = encoded.slice(1)
    np.testing.assert_array_equal(
        NdarrayCodec().decode(dtype, (a, b), sliced), np.stack(arrays[1:]) if rows > 1 else np.empty((0, a, b))
    )


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5)))
def test_variable_shapes_and_compression_round_trip(arr: np.ndarray) -> None:
    shape = tuple(None for _ in arr.shape)
    for codec in (NdarrayCodec(), CompressedNdarrayCodec()):
        encoded = codec.encode("f", "float32", shape, [arr, arr[..., :1]])
        decoded = codec.decode("float32", shape, encoded)
        np.testing.assert_array_equal(decoded[0], arr)
        np.testing.assert_array_equal(decoded[1], arr[..., :1])


def test_compressed_ndarray_is_petastorms_npz() -> None:
    arr = np.arange(12, dtype=np.int16).reshape(3, 4)
    blob = CompressedNdarrayCodec().encode("f", "int16", (3, 4), [arr])[0].as_py()
    np.testing.assert_array_equal(np.load(io.BytesIO(blob))["arr"], arr)


def test_images_are_rgb_in_memory_and_bgr_on_disk_like_petastorm() -> None:
    rgb = np.zeros((4, 5, 3), np.uint8)
    rgb[..., 0] = 200  # pure red
    blob = ImageCodec("png").encode("img", "uint8", (4, 5, 3), [rgb])[0].as_py()
    raw = cv2.imdecode(np.frombuffer(blob, np.uint8), cv2.IMREAD_UNCHANGED)
    assert raw[0, 0].tolist() == [0, 0, 200]  # OpenCV's BGR, as petastorm writes it
    got = ImageCodec("png").decode("uint8", (4, 5, 3), pa.array([blob, blob]))
    assert got.shape == (2, 4, 5, 3)
    np.testing.assert_array_equal(got[1], rgb)
    grey = (np.arange(20, dtype=np.uint8) * 10).reshape(4, 5)
    np.testing.assert_array_equal(
        ImageCodec("png").decode("uint8", (4, 5), ImageCodec("png").encode("m", "uint8", (4, 5), [grey])), [grey]
    )
    jpeg = ImageCodec("jpeg", 90).decode(
        "uint8", (4, 5, 3), ImageCodec("jpeg", 90).encode("img", "uint8", (4, 5, 3), [rgb])
    )
    assert np.abs(jpeg[0].astype(int) - rgb).mean() < 8


def test_bad_values_name_the_field_and_row() -> None:
    good = np.zeros((2, 3), np.float32)
    with pytest.raises(SchemaMismatch, match=r"field 'm', row 1: expected shape \(2, 3\), got \(3, 3\)"):
        NdarrayCodec().encode("m", "float32", (2, 3), [good, np.zeros((3, 3), np.float32)])
    with pytest.raises(SchemaMismatch, match="field 'm', row 2: expected dtype float32, got float64"):
        NdarrayCodec().encode("m", "float32", (2, 3), [good, good, good.astype(np.float64)])
    with pytest.raises(SchemaMismatch, match="field 'm', row 0: expected a numpy array"):
        CompressedNdarrayCodec().encode("m", "float32", (2, 3), [[1, 2, 3]])
    with pytest.raises(SchemaMismatch, match="images are"):
        ImageCodec().encode("img", "uint8", (None, None, None), [np.zeros((2, 2, 4), np.uint8)])
    with pytest.raises(SchemaMismatch, match="field 'n', row 1"):
        ScalarCodec().encode("n", "int32", (), [1, "x"])
    assert (
        NdarrayCodec().decode("float32", (2, 3), NdarrayCodec().encode("m", "float32", (2, 3), [good, None]))[1] is None
    )


def test_codec_specs_round_trip() -> None:
    for codec in (ScalarCodec(), NdarrayCodec(), CompressedNdarrayCodec(), ImageCodec("png"), ImageCodec("jpeg", 70)):
        assert codec_from_spec(codec.describe()) == codec
    with pytest.raises(SchemaMismatch):
        codec_from_spec("zstd-magic")


def test_scalars_decode_as_petastorms_make_reader() -> None:
    """make_reader gives ``numpy_dtype(value)`` per cell: dal gives the same values as one column."""
    import datetime
    from decimal import Decimal

    # uint8 in a Spark ShortType column (int16 on disk), float16 in a FloatType column
    got = ScalarCodec("int16").decode("uint8", (), pa.array([0, 255, 7], pa.int16()))
    assert got.dtype == np.uint8 and got.tolist() == [0, 255, 7]
    assert ScalarCodec("float").decode("float16", (), pa.array([1.5, -2.0], pa.float32())).dtype == np.float16
    # timestamps as datetime64[us], dates as datetime64[D] (np.datetime64 of a pandas Timestamp / a date)
    ts = datetime.datetime(2001, 2, 3, 4, 5, 6, 789012)
    got = ScalarCodec("timestamp[ns]").decode("datetime64", (), pa.array([ts], pa.timestamp("ns")))
    assert got.dtype == np.dtype("datetime64[us]") and got[0] == np.datetime64(ts)
    got = ScalarCodec("date32[day]").decode("datetime64", (), pa.array([datetime.date(1969, 12, 25)]))
    assert got.dtype == np.dtype("datetime64[D]") and got[0] == np.datetime64("1969-12-25")
    # decimals as Decimal objects, exact scale kept
    got = ScalarCodec("decimal128(10, 4)").decode(
        "decimal", (), pa.array([Decimal("-1.2500"), None], pa.decimal128(10, 4))
    )
    assert str(got[0]) == "-1.2500" and got[1] is None
    # a null float is NaN (pandas gives make_reader NaN); any other null is None beside numpy scalars
    floats = ScalarCodec().decode("float64", (), pa.array([1.0, None]))
    assert floats.dtype == np.float64 and np.isnan(floats[1])
    ints = ScalarCodec("int16").decode("int32", (), pa.array([3, None, -4], pa.int16()))
    assert ints.dtype == object and ints[1] is None and type(ints[0]) is np.int32 and ints[2] == -4
    flags = ScalarCodec().decode("bool", (), pa.array([True, None]))
    assert type(flags[0]) is np.bool_ and flags[1] is None
    stamps = ScalarCodec("timestamp[us]").decode("datetime64", (), pa.array([ts, None], pa.timestamp("us")))
    assert stamps[1] is None and stamps[0] == np.datetime64(ts, "us")
    assert ScalarCodec().decode("str", (), pa.array(["a", None])).tolist() == ["a", None]
    # the old decoder cast a null int through NaN into garbage; no cell is ever invented
    assert ScalarCodec().decode("int64", (), pa.array([None], pa.int64()))[0] is None


def test_scalar_storage_types_round_trip_through_the_catalog() -> None:
    from decimal import Decimal

    from dal import TensorField

    for spec in ("decimal128(12, 4)", "timestamp[us]", "timestamp[ns, tz=UTC]", "date32[day]", "int16", "float"):
        assert str(arrow_type(spec)) == spec
    with pytest.raises(SchemaMismatch, match="not a scalar Arrow type"):
        arrow_type("list<item: int32>")
    field = TensorField("d", Decimal, (), ScalarCodec(pa.decimal128(12, 4)))
    back = TensorField.from_catalog(field.to_catalog())
    assert (back.dtype_name, back.codec, field.dtype_name) == ("decimal", ScalarCodec("decimal128(12, 4)"), "decimal")
    # the dtype's own storage type is spelled as no storage type, so schemas compare equal
    assert TensorField("i", np.int32, (), ScalarCodec("int32")) == TensorField("i", np.int32)
    with pytest.raises(SchemaMismatch, match="decimal128"):
        TensorField("d", Decimal).to_catalog()  # a Decimal needs its precision and scale
    with pytest.raises(SchemaMismatch, match="timestamp"):
        TensorField("t", np.datetime64).to_catalog()


def test_a_damaged_cell_is_a_format_error_naming_the_row() -> None:
    good = NdarrayCodec().encode("m", "float32", (2,), [np.zeros(2, np.float32)])[0].as_py()
    for codec, cells in (
        (NdarrayCodec(), [good, good[:-3]]),  # truncated: the batch path falls back, then names the row
        (NdarrayCodec(), [good, b"junk"]),
        (CompressedNdarrayCodec(), [b"PK\x03\x04junk"]),
        (ImageCodec("png"), [b"\x89PNG junk"]),
    ):
        with pytest.raises(FormatError, match=r"row \d: not a valid"):
            codec.decode("float32", (2,), pa.array(cells, pa.binary()))


def test_cells_of_one_shape_but_different_dtypes_are_not_widened() -> None:
    """petastorm gives each cell as np.load read it: |S9 and |S10 cells stay |S9 and |S10 (np.stack would
    widen both to |S10; found on legacy__0.6.0's matrix_string)."""
    cells = [np.array([b"a" * 9, b"b"]), np.array([b"c" * 10, b"d"])]
    got = NdarrayCodec().decode("bytes", (None,), NdarrayCodec().encode("s", "bytes", (None,), cells))
    assert isinstance(got, list) and [c.dtype.str for c in got] == ["|S9", "|S10"]
    same = NdarrayCodec().decode("bytes", (None,), NdarrayCodec().encode("s", "bytes", (None,), [cells[0], cells[0]]))
    assert isinstance(same, np.ndarray) and same.shape == (2, 2)


def test_the_other_image_formats_petastorm_accepts() -> None:
    rgb = (np.arange(8 * 6 * 3) * 7 % 256).astype(np.uint8).reshape(8, 6, 3)
    grey16 = (np.arange(8 * 6) * 1000).astype(np.uint16).reshape(8, 6)
    for fmt, arr in (("bmp", rgb), ("tiff", rgb), ("tif", grey16), ("webp", rgb), ("ppm", rgb)):
        codec = ImageCodec(fmt)
        assert codec_from_spec(codec.describe()) == codec
        dtype = str(arr.dtype)
        got = codec.decode(dtype, arr.shape, codec.encode("img", dtype, arr.shape, [arr, arr]))
        np.testing.assert_array_equal(got[1], arr)  # all lossless (webp without a quality is lossless)
    assert ImageCodec("tif").describe() == "image/tiff"
    with pytest.raises(ValueError, match="image format must be one of"):
        ImageCodec("gif")


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def _npy_16(arr: np.ndarray) -> bytes:
    """A version 1.0 .npy cell with its header padded to 16 bytes, as numpy before 1.20 (and so petastorm's
    writers of that time) wrote it: the same array, another header length."""
    header = repr({"descr": np.lib.format.dtype_to_descr(arr.dtype), "fortran_order": False, "shape": arr.shape})
    header += " " * (-(10 + len(header) + 1) % 16) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + arr.tobytes()


def test_npy_cells_decode_as_petastorm_whatever_their_headers() -> None:
    """petastorm's NdarrayCodec decodes each cell with ``np.load``: the one strided view of a column must give
    exactly that, and fall back to cell by cell wherever one header differs (same cell length or not)."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    cases = {
        "one header": [_npy(a + i) for i in range(5)],
        "another shape, same length": [_npy(a), _npy(a.reshape(3, 2)), _npy(a + 1)],
        "another dtype, same length": [_npy(a), _npy(a.astype(np.int32)), _npy(a + 1)],
        "big-endian among little": [_npy(a), _npy(a.astype(">f4")), _npy(a + 1)],
        "big-endian only": [_npy((a + i).astype(">f4")) for i in range(3)],
        "fortran order": [_npy(np.asfortranarray(a + i)) for i in range(3)],
        "16-byte header": [_npy_16(a + i) for i in range(3)],
        "16- and 64-byte headers": [_npy_16(a), _npy(a + 1)],
    }
    for name, cells in cases.items():
        for prefix in ([], [b"x"], [b"xyz"]):  # a sliced array whose first cell starts at an odd byte
            array = pa.array(prefix + cells, type=pa.binary()).slice(len(prefix))
            got = NdarrayCodec().decode("float32", (None, None), array)
            reference = [np.load(io.BytesIO(c), allow_pickle=False) for c in cells]  # petastorm's decode
            assert len(got) == len(reference), name
            if name in ("one header", "big-endian only", "16-byte header"):  # one view: no per-cell parse
                assert isinstance(got, np.ndarray) and got.shape == (len(cells), 2, 3), name
            for g, r in zip(got, reference, strict=True):
                assert g.dtype == r.dtype and g.shape == r.shape, name
                assert g.tobytes() == r.tobytes(), name  # bit-exact, NaN payloads included


def test_decode_table_builds_each_fields_codec_once_and_takes_any_field() -> None:
    """``decode_table`` builds a field's TensorField once per catalog field (not per chunk); a field whose shape
    is a list (it does not hash) is still decoded."""
    from dal.catalog.types import Field, Schema
    from dal.tensors.schema import _tensor_field, decode_table

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    table = pa.table({"m": NdarrayCodec().encode("m", "float32", (2, 3), [a, a + 1])})
    for shape in ((2, 3), [2, 3]):
        field = Field("m", "binary", True, "float32", shape, "ndarray")  # type: ignore[arg-type]
        got = decode_table(table, Schema((field,)))["m"]
        np.testing.assert_array_equal(got, np.stack([a, a + 1]))
    hashable = Field("m", "binary", True, "float32", (2, 3), "ndarray")
    assert _tensor_field(hashable) is _tensor_field(Field("m", "binary", True, "float32", (2, 3), "ndarray"))
