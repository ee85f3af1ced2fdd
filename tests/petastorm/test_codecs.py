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

from dal.codecs import CompressedNdarrayCodec, ImageCodec, NdarrayCodec, ScalarCodec, codec_from_spec
from dal.errors import SchemaMismatch

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
