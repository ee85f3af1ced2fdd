"""``.npy`` cells decoded by dal's one-view path and by the real petastorm 0.13.1's ``NdarrayCodec`` (legacy
venv): the same dtype, shape and bytes, whatever the headers (the cases of test_codecs' np.load comparison)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dal.tensors.codecs import NdarrayCodec
from tests.petastorm.legacy import run_legacy
from tests.petastorm.test_codecs import _npy, _npy_16

pytestmark = pytest.mark.slow


def test_npy_cells_decode_as_petastorms_own_codec(tmp_path: Path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    nan = np.array([[np.nan, 1, 2], [3, 4, 5]], np.float32).view(np.uint32) | np.uint32(1)  # a NaN payload
    columns = [
        [_npy(a + i) for i in range(4)],  # one header: the one-view path
        [_npy((a + i).astype(">f4")) for i in range(3)],
        [_npy_16(a + i) for i in range(3)],
        [_npy(nan.view(np.float32)), _npy(a)],
        [_npy(a), _npy(a.reshape(3, 2)), _npy(a.astype(np.int32)), _npy(np.asfortranarray(a)), _npy_16(a)],
    ]
    cells = [c for column in columns for c in column]
    np.savez(tmp_path / "cells.npz", **{f"cell_{i}": np.frombuffer(c, np.uint8) for i, c in enumerate(cells)})
    proc = run_legacy("petastorm_ndarray_decode.py", str(tmp_path / "cells.npz"), str(tmp_path / "decoded.npz"))
    assert proc.returncode == 0 and f"DECODED {len(cells)}" in proc.stdout, proc.stderr[-3000:]
    theirs = np.load(tmp_path / "decoded.npz")
    k = 0
    for column in columns:
        ours = NdarrayCodec().decode("float32", (None, None), pa.array(column, type=pa.binary()))
        for cell in ours:
            expected = theirs[f"decoded_{k}"]
            assert (cell.dtype, cell.shape) == (expected.dtype, expected.shape), k
            assert cell.tobytes() == expected.tobytes(), k
            k += 1
    assert k == len(cells)
