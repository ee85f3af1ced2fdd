"""Runs in the legacy venv: petastorm's own NdarrayCodec decodes each .npy cell of cells.npz (cell_0, cell_1, …,
uint8 arrays of the cell's bytes) and saves what it gave, dtype, shape and bytes, as decoded.npz (decoded_0, …)."""

import sys

import numpy as np
from petastorm.codecs import NdarrayCodec
from petastorm.unischema import UnischemaField

cells_path, out_path = sys.argv[1], sys.argv[2]
cells = np.load(cells_path)
field = UnischemaField("m", np.float32, (None, None), NdarrayCodec(), False)
codec = NdarrayCodec()
out = {}
for i in range(len(cells.files)):
    out[f"decoded_{i}"] = np.asarray(codec.decode(field, cells[f"cell_{i}"].tobytes()))
np.savez(out_path, **out)
print("DECODED", len(out))
