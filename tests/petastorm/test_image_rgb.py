"""ImageCodec gives RGB everywhere: one image, a batch of one shape, and images of different shapes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dal.errors import FormatError
from dal.tensors.codecs import ImageCodec


def _image(h: int, w: int) -> np.ndarray:
    rgb = np.zeros((h, w, 3), np.uint8)
    rgb[..., 0], rgb[..., 1], rgb[..., 2] = 200, 100, 7  # distinct channels: a BGR answer would show
    return rgb


def test_one_image_decodes_to_rgb() -> None:
    codec = ImageCodec("png")
    assert np.array_equal(codec._decode_one(codec._encode_one(_image(4, 5))), _image(4, 5))


def test_a_batch_and_mixed_shapes_decode_to_rgb() -> None:
    codec = ImageCodec("png")
    same = codec.encode("img", "uint8", (4, 5, 3), [_image(4, 5), _image(4, 5)])
    assert np.array_equal(codec.decode("uint8", (4, 5, 3), same), np.stack([_image(4, 5)] * 2))
    mixed = codec.encode("img", "uint8", (None, None, 3), [_image(4, 5), None, _image(2, 3)])
    got = codec.decode("uint8", (None, None, 3), mixed)
    assert np.array_equal(got[0], _image(4, 5)) and got[1] is None and np.array_equal(got[2], _image(2, 3))
    assert all(c is None or c.flags.c_contiguous for c in got)  # torch.from_numpy takes them as they are
    grey = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert np.array_equal(codec.decode("uint8", (3, 4), codec.encode("g", "uint8", (3, 4), [grey]))[0], grey)
    assert isinstance(same, pa.Array)


def _cell_by_cell(codec: ImageCodec, array: pa.Array) -> list[np.ndarray | None]:
    return codec._decode_cells(array)


def test_the_one_pass_decode_is_bit_exact_with_cell_by_cell_and_falls_back_where_it_must() -> None:
    """Images of a fixed shape decode in one pass from the Arrow buffer into one array; the answer equals
    OpenCV cell by cell (RGB) for RGB and grey, 8- and 16-bit, sliced arrays and large_binary, and every case
    the one pass cannot take (a null, another shape or dtype, damaged bytes) gives what it always gave."""
    import cv2

    decoded: Any
    rng = np.random.default_rng(3)
    codec = ImageCodec("png")
    rgb = [rng.integers(0, 256, (6, 7, 3), dtype=np.uint8) for _ in range(9)]
    cells = codec.encode("img", "uint8", (6, 7, 3), rgb)
    decoded = [cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_UNCHANGED) for b in cells.to_pylist()]
    want = np.stack([d[:, :, ::-1] for d in decoded])
    assert np.array_equal(want, np.stack(rgb))
    for array in (cells, cells.slice(2, 5), cells.cast(pa.large_binary()), cells.cast(pa.large_binary()).slice(4)):
        got = codec.decode("uint8", (6, 7, 3), array)
        assert got is not None and got.dtype == np.uint8 and got.flags.c_contiguous
        assert np.array_equal(got, np.stack(_cell_by_cell(codec, array)))  # type: ignore[arg-type]
        assert codec._decode_into("uint8", (6, 7, 3), array) is not None  # the one pass took it
    grey16 = [rng.integers(0, 65536, (5, 4), dtype=np.uint16) for _ in range(3)]
    g = codec.encode("g", "uint16", (5, 4), grey16)
    assert np.array_equal(codec.decode("uint16", (5, 4), g), np.stack(grey16))
    assert codec._decode_into("uint16", (5, 4), g) is not None
    # the cases the one pass leaves to the cell-by-cell path, which answers as before
    nulls = codec.encode("img", "uint8", (6, 7, 3), [rgb[0], None])
    other_shape = codec.encode(
        "img", "uint8", (None, None, 3), [rgb[0], rng.integers(0, 256, (2, 2, 3), dtype=np.uint8)]
    )
    declared_8_stored_16 = codec.encode("g", "uint16", (5, 4), grey16)
    for array, dtype, shape in (
        (nulls, "uint8", (6, 7, 3)),
        (other_shape, "uint8", (6, 7, 3)),
        (declared_8_stored_16, "uint8", (5, 4)),
    ):
        assert codec._decode_into(dtype, shape, array) is None
        got, ref = codec.decode(dtype, shape, array), _stack_or_list(_cell_by_cell(codec, array))
        assert type(got) is type(ref) and all(
            (a is None and b is None) or np.array_equal(a, b) for a, b in zip(list(got), list(ref), strict=True)
        )
    damaged = pa.array([cells[0].as_py(), b"not a png", b""], pa.binary())
    assert codec._decode_into("uint8", (6, 7, 3), damaged) is None
    with pytest.raises(FormatError, match="row 1"):
        codec.decode("uint8", (6, 7, 3), damaged)


def _stack_or_list(cells: list[np.ndarray | None]) -> Any:
    from dal.tensors.codecs import _stack

    return _stack(cells)
