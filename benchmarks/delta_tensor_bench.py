"""Raw uint8 tensors (32x32x3 = 3 KB per sample) written to Delta and read by ``to_torch(256)``.

    FLAT=1 python benchmarks/delta_tensor_bench.py 30000    # FixedSizeList<uint8>[3072]; without FLAT: [32][32][3]

Prints samples/s, CPU ms per sample and time to the first batch for 3 rounds, and the batch's dtype/shape.
Before issue 23 item 8 the column was stored as list<int16> and arrived as int16; run the same script with
PYTHONPATH pointing at an older checkout for the baseline, interleaved with this one.
"""

import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

d = tempfile.mkdtemp(prefix="dal-tb-")
os.environ["DAL_CATALOG_URL"] = f"sqlite:///{d}/cat.db"
import dal  # noqa: E402  (after DAL_CATALOG_URL is set)

n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
rng = np.random.default_rng(0)
x = rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
flat = pa.array(x.reshape(-1))
col = (
    pa.FixedSizeListArray.from_arrays(flat, 3072)
    if os.environ.get("FLAT")
    else pa.FixedSizeListArray.from_arrays(
        pa.FixedSizeListArray.from_arrays(pa.FixedSizeListArray.from_arrays(flat, 3), 32), 32
    )
)
for k in range(0, n, 10_000):
    dal.write(pa.table({"id": np.arange(k, min(k + 10_000, n)), "img": col.slice(k, 10_000)}), "tb", path=f"{d}/tb")
scan = dal.open("tb").scan()
best = 0.0
for r in range(3):
    t = time.perf_counter()
    c = time.process_time()
    rows = 0
    first = None
    for b in scan.to_torch(256):
        if first is None:
            first = time.perf_counter() - t
        rows += len(b["id"])
    wall = time.perf_counter() - t
    cpu = time.process_time() - c
    best = max(best, rows / wall)
    print(
        f"round {r}: {rows / wall:,.0f} samples/s, {cpu / rows * 1000:.4f} CPU ms/sample, first batch {first * 1000:.0f} ms"
    )
print(f"best {best:,.0f} samples/s; dtype {b['img'].dtype}, shape {tuple(b['img'].shape)}")
