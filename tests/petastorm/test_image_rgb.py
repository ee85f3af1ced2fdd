"""ImageCodec gives RGB everywhere: one image, a batch of one shape, and images of different shapes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

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
